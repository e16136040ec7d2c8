// zlib's CRC-32 (the one .gnu_debuglink and bpfprof's cache files record), over any length:
// zlib takes at most 4 GiB a call.
#pragma once

#include <zlib.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace bpfprof {

// The CRC-32 of `size` bytes at `bytes`, going on from `crc` (0 for a first piece).
inline uint32_t crc32_of(const void* bytes, size_t size, uint32_t crc = 0) {
  constexpr size_t kMostAtOnce = size_t{1} << 30;
  uLong value = crc;
  const auto* at = static_cast<const Bytef*>(bytes);
  while (size > 0) {
    const size_t piece = std::min(size, kMostAtOnce);
    value = ::crc32(value, at, static_cast<uInt>(piece));
    at += piece;
    size -= piece;
  }
  return static_cast<uint32_t>(value);
}

inline uint32_t crc32_of(std::string_view bytes, uint32_t crc = 0) {
  return crc32_of(bytes.data(), bytes.size(), crc);
}

}  // namespace bpfprof
