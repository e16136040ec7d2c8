// A runtime's release as its binary states it ("8.2.36" after "PHP/", "13.1.5" after
// "[erts-"): which layout of its structures applies.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string_view>

namespace bpfprof {

struct RuntimeRelease {
  uint32_t major = 0;
  uint32_t minor = 0;
  uint32_t patch = 0;
};

// major.minor[.patch] at the start of `text` (each part at most 6 digits, anything may follow);
// nullopt without a minor.
std::optional<RuntimeRelease> parse_release(std::string_view text);

// Where a release is searched for: the binary open as `fd`, its first `size` bytes read in
// pieces of 1 MiB with pread (a file its owner truncates meanwhile gives a short read, where a
// mapping would raise SIGBUS), each beginning with the last kFileTextOverlap bytes of the one
// before, so that any text of up to that length is whole in one piece. `visit` sees each piece
// until it returns true.
inline constexpr size_t kFileTextOverlap = 64;
void scan_file_text(int fd, uint64_t size, const std::function<bool(std::string_view)>& visit);

}  // namespace bpfprof
