// DWARF's LEB128 numbers, read from untrusted bytes: at most 64 bits, never past `end`.
#pragma once

#include <cstdint>
#include <optional>

namespace bpfprof {

// An unsigned LEB128 at `at`, which moves past it; nullopt when cut short or over 64 bits.
inline std::optional<uint64_t> read_uleb128(const uint8_t*& at, const uint8_t* end) {
  uint64_t value = 0;
  for (unsigned shift = 0; at < end && shift < 64; shift += 7) {
    const uint8_t byte = *at++;
    value |= uint64_t{byte & 0x7fu} << shift;
    if ((byte & 0x80) == 0) return value;
  }
  return std::nullopt;
}

// A signed LEB128, sign-extended from its last byte; as read_uleb128 otherwise.
inline std::optional<int64_t> read_sleb128(const uint8_t*& at, const uint8_t* end) {
  uint64_t value = 0;
  for (unsigned shift = 0; at < end && shift < 64; shift += 7) {
    const uint8_t byte = *at++;
    value |= uint64_t{byte & 0x7fu} << shift;
    if ((byte & 0x80) == 0) {
      if (shift + 7 < 64 && (byte & 0x40) != 0) value |= ~uint64_t{0} << (shift + 7);
      return static_cast<int64_t>(value);
    }
  }
  return std::nullopt;
}

}  // namespace bpfprof
