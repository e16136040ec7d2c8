#include "symbols/go/go_release.h"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <string>

namespace bpfprof::go {
namespace {

constexpr std::string_view kBuildinfoMagic = "\xff Go buildinf:";
constexpr uint8_t kBuildinfoInline = 2;  // flags: the strings follow the header (1.18+)
constexpr size_t kBuildinfoHeader = 32;
constexpr size_t kMaxVersionLength = 64;
// Version-looking strings in read-only data looked at before giving up.
constexpr int kMaxRodataCandidates = 16;

bool printable(uint8_t c) { return c >= 0x20 && c < 0x7f; }

// A decimal number at the start of `text`, consumed.
std::optional<uint32_t> number(std::string_view& text) {
  uint32_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end == text.data()) return std::nullopt;
  text.remove_prefix(static_cast<size_t>(end - text.data()));
  return value;
}

}  // namespace

std::optional<GoRelease> parse_go_release(std::string_view text) {
  const size_t at = text.find("go1.");
  if (at == std::string_view::npos) return std::nullopt;
  text.remove_prefix(at + 4);
  GoRelease release;
  const std::optional<uint32_t> minor = number(text);
  if (!minor || *minor > 1000) return std::nullopt;
  release.minor = *minor;
  if (text.starts_with('.')) {
    text.remove_prefix(1);
    release.patch = number(text).value_or(0);
  }
  return release;
}

std::optional<GoRelease> release_from_buildinfo(std::span<const uint8_t> section) {
  if (section.size() < kBuildinfoHeader ||
      memcmp(section.data(), kBuildinfoMagic.data(), kBuildinfoMagic.size()) != 0 ||
      !(section[15] & kBuildinfoInline))
    return std::nullopt;
  // A uvarint length, then the version's bytes.
  size_t at = kBuildinfoHeader;
  uint64_t length = 0;
  for (int shift = 0; at < section.size() && shift < 64; shift += 7) {
    const uint8_t byte = section[at++];
    length |= static_cast<uint64_t>(byte & 0x7f) << shift;
    if (!(byte & 0x80)) break;
  }
  if (length == 0 || length > kMaxVersionLength || length > section.size() - at)
    return std::nullopt;
  return parse_go_release(
      std::string_view(reinterpret_cast<const char*>(section.data() + at), length));
}

std::optional<GoRelease> release_from_rodata(std::span<const uint8_t> rodata) {
  constexpr std::string_view kPrefix = "go1.";
  const auto* begin = reinterpret_cast<const char*>(rodata.data());
  const std::string_view text(begin, rodata.size());
  int candidates = 0;
  for (size_t at = text.find(kPrefix);
       at != std::string_view::npos && candidates < kMaxRodataCandidates;
       at = text.find(kPrefix, at + 1)) {
    if (at > 0 && printable(rodata[at - 1])) continue;
    size_t end = at + kPrefix.size();
    while (end < rodata.size() && end - at < kMaxVersionLength && printable(rodata[end])) ++end;
    if (end < rodata.size() && printable(rodata[end])) continue;
    ++candidates;
    const std::string_view candidate = text.substr(at, end - at);
    // Only the release itself ("go1.26.5", "go1.26rc1"), not a file name or a sentence.
    if (candidate.find_first_not_of("go1234567890.rcbeta") != std::string_view::npos) continue;
    if (std::optional<GoRelease> release = parse_go_release(candidate)) return release;
  }
  return std::nullopt;
}

}  // namespace bpfprof::go
