// Lookups in vectors of ranges sorted by their start (symbols, unwind rows, code ranges):
// the one place the "last range starting at or below an address" search is written.
#pragma once

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <vector>

namespace bpfprof {

// The last element whose `start` member is at or below `at`, or nullptr (none starts there
// or before). Whether it reaches `at` is the caller's to check: ranges end differently.
template <typename T, typename Start>
const T* last_starting_at_or_below(const std::vector<T>& sorted, uint64_t at, Start T::*start) {
  auto after = std::upper_bound(sorted.begin(), sorted.end(), at, [&](uint64_t value, const T& e) {
    return value < static_cast<uint64_t>(e.*start);
  });
  return after == sorted.begin() ? nullptr : &*std::prev(after);
}

}  // namespace bpfprof
