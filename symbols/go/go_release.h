// Which Go release built a binary: the runtime's structures the kernel walk reads (a
// goroutine's labels among them) change between releases. Read from the binary's
// .go.buildinfo (1.18+ keeps the version there inline), else from its read-only data, where the
// runtime keeps the version string (runtime.buildVersion: Go 1.26's esbuild has no
// .go.buildinfo). The bytes come from any file: every read is bounded.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

namespace bpfprof::go {

struct GoRelease {
  uint32_t minor = 0;  // go1.<minor>
  uint32_t patch = 0;
  bool operator==(const GoRelease&) const = default;
  bool at_least(uint32_t m) const { return minor >= m; }
};

// "go1.24.3", "go1.25rc1", "go1.25-20250209-RC00", "devel go1.26-abcdef": the release named
// first; nullopt where there is none.
std::optional<GoRelease> parse_go_release(std::string_view text);

// From the contents of a .go.buildinfo section ("\xff Go buildinf:", 1.18+'s inline form).
std::optional<GoRelease> release_from_buildinfo(std::span<const uint8_t> section);

// From read-only data: a "go1.N" or "go1.N.P" string standing alone (no printable byte on
// either side), as the runtime's version string does; the first of at most a few looked at.
std::optional<GoRelease> release_from_rodata(std::span<const uint8_t> rodata);

}  // namespace bpfprof::go
