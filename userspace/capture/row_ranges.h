// Which rows of the in-kernel unwinder's global row array are in use: a table takes a
// contiguous range, the first free range that fits (else the never-used end), and gives it
// back when no process maps its file any more, so that a long recording with a churn of
// programs does not fill the array with the tables of programs long gone.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>

namespace bpfprof {

class RowRanges {
 public:
  explicit RowRanges(uint32_t capacity) : capacity_(capacity) {}

  // The first row of `count` free contiguous rows, now in use; nullopt if none.
  std::optional<uint32_t> allocate(uint32_t count);
  // Gives back [first, first + count), allocated before.
  void release(uint32_t first, uint32_t count);
  uint32_t in_use() const { return in_use_; }
  // More rows at the end (the array grew): `capacity` at least the current one.
  void grow(uint32_t capacity) { capacity_ = std::max(capacity_, capacity); }

 private:
  uint32_t capacity_;
  uint32_t end_ = 0;  // rows at and above it were never used
  uint32_t in_use_ = 0;
  std::map<uint32_t, uint32_t> free_;  // first row -> count, below end_, never adjacent
};

}  // namespace bpfprof
