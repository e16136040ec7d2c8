// Bounds-checked little-endian reads of untrusted bytes (a Go binary's tables): each read
// says whether it was inside the span, offsets of any size are safe.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string_view>

namespace bpfprof::go {

class Bytes {
 public:
  // A name longer than this is not one a Go linker wrote (the longest generic instantiations
  // run to a few kilobytes).
  static constexpr uint64_t kMaxStringBytes = 64 * 1024;

  Bytes() = default;
  explicit Bytes(std::span<const uint8_t> bytes) : bytes_(bytes) {}

  uint64_t size() const { return bytes_.size(); }
  std::span<const uint8_t> span() const { return bytes_; }

  bool fits(uint64_t at, uint64_t n) const {
    return at <= bytes_.size() && bytes_.size() - at >= n;
  }
  bool u8(uint64_t at, uint8_t* out) const { return read(at, 1, out); }
  bool u16(uint64_t at, uint16_t* out) const { return read(at, 2, out); }
  bool u32(uint64_t at, uint32_t* out) const { return read(at, 4, out); }
  bool u64(uint64_t at, uint64_t* out) const { return read(at, 8, out); }
  // A pointer-sized field: 4 or 8 bytes.
  bool word(uint64_t at, uint8_t size, uint64_t* out) const {
    if (size == 8) return u64(at, out);
    uint32_t v;
    if (size != 4 || !u32(at, &v)) return false;
    *out = v;
    return true;
  }
  // From `at` to the end; empty past the end.
  Bytes from(uint64_t at) const {
    return at <= bytes_.size() ? Bytes(bytes_.subspan(at)) : Bytes();
  }
  Bytes prefix(uint64_t n) const {
    return Bytes(bytes_.first(n < bytes_.size() ? n : bytes_.size()));
  }
  // Go's unsigned varint of at most 32 bits (5 bytes) at *pos, which moves past it.
  bool varint(uint64_t* pos, uint32_t* out) const {
    uint32_t value = 0;
    for (uint32_t shift = 0; shift < 35; shift += 7) {
      uint8_t b;
      if (!u8(*pos, &b)) return false;
      ++*pos;
      value |= static_cast<uint32_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) {
        *out = value;
        return true;
      }
    }
    return false;
  }
  // A NUL-terminated string at `at`; nullopt when no NUL ends it within the span and the cap.
  std::optional<std::string_view> cstring(uint64_t at) const {
    if (at >= bytes_.size()) return std::nullopt;
    const uint64_t limit = std::min<uint64_t>(bytes_.size() - at, kMaxStringBytes);
    const void* nul = memchr(bytes_.data() + at, 0, limit);
    if (!nul) return std::nullopt;
    const auto* start = reinterpret_cast<const char*>(bytes_.data() + at);
    return std::string_view(start, static_cast<const char*>(nul) - start);
  }

 private:
  template <typename T>
  bool read(uint64_t at, uint64_t n, T* out) const {
    if (!fits(at, n)) return false;
    T value = 0;
    for (uint64_t i = 0; i < n; ++i)
      value |= static_cast<T>(static_cast<T>(bytes_[at + i]) << (8 * i));
    *out = value;
    return true;
  }

  std::span<const uint8_t> bytes_;
};

}  // namespace bpfprof::go
