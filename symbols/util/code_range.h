// A range of code addresses.
#pragma once

#include <cstdint>

namespace bpfprof {

struct CodeRange {
  uint64_t start = 0;  // file virtual address
  uint64_t end = 0;    // past the last byte
  bool operator==(const CodeRange&) const = default;
};

}  // namespace bpfprof
