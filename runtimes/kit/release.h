// A runtime's release as its binary states it ("8.2.36" after "PHP/", "13.1.5" after
// "[erts-"): which layout of its structures applies.
#pragma once

#include <cstdint>
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

}  // namespace bpfprof
