// Small text helpers used across bpfprof: each exists once, here.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace bpfprof {

// The last component of a path ("/usr/bin/sort" -> "sort").
inline std::string base_name(std::string_view path) {
  const size_t slash = path.find_last_of('/');
  return std::string(slash == std::string_view::npos ? path : path.substr(slash + 1));
}

// Bytes as lowercase hex, two digits each (build-ids).
inline std::string hex_string(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(bytes.size() * 2);
  for (unsigned char byte : bytes) {
    hex.push_back(kDigits[byte >> 4]);
    hex.push_back(kDigits[byte & 0xf]);
  }
  return hex;
}
template <typename Bytes>
std::string hex_string(const Bytes& bytes) {
  return hex_string(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
}

}  // namespace bpfprof
