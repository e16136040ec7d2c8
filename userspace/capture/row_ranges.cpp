#include "userspace/capture/row_ranges.h"

namespace bpfprof {

std::optional<uint32_t> RowRanges::allocate(uint32_t count) {
  if (count == 0) return std::nullopt;
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    auto [first, size] = *it;
    if (size < count) continue;
    free_.erase(it);
    if (size > count) free_.emplace(first + count, size - count);
    in_use_ += count;
    return first;
  }
  if (count > capacity_ - end_) return std::nullopt;
  const uint32_t first = end_;
  end_ += count;
  in_use_ += count;
  return first;
}

void RowRanges::release(uint32_t first, uint32_t count) {
  in_use_ -= count;
  auto next = free_.lower_bound(first);
  if (next != free_.end() && first + count == next->first) {
    count += next->second;
    next = free_.erase(next);
  }
  if (next != free_.begin()) {
    auto previous = std::prev(next);
    if (previous->first + previous->second == first) {
      first = previous->first;
      count += previous->second;
      free_.erase(previous);
    }
  }
  // A range that reaches the never-used end joins it.
  if (first + count == end_) {
    end_ = first;
  } else {
    free_.emplace(first, count);
  }
}

}  // namespace bpfprof
