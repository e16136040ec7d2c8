// insert_replacing_overlaps: what mmap(MAP_FIXED) does to the mappings a new one overlaps.
#include <gtest/gtest.h>

#include <map>
#include <vector>

#include "symbols/util/mapping_ranges.h"

namespace bpfprof {
namespace {

struct Range {
  uint64_t start, end, file_offset;
  int id;
  bool operator==(const Range&) const = default;
};

std::vector<Range> ranges(const std::map<uint64_t, Range>& m) {
  std::vector<Range> out;
  for (const auto& [start, r] : m) out.push_back(r);
  return out;
}

TEST(MappingRanges, ANewMappingTrimsSplitsAndDropsWhatItOverlaps) {
  std::map<uint64_t, Range> m;
  insert_replacing_overlaps(m, Range{0x1000, 0x5000, 0, 1});
  insert_replacing_overlaps(m, Range{0x6000, 0x7000, 0, 2});
  // Starts inside 1 and covers 2 whole: 1 keeps its head and its tail, 2 is gone.
  insert_replacing_overlaps(m, Range{0x2000, 0x3000, 0x100, 3});
  EXPECT_EQ(ranges(m), (std::vector<Range>{{0x1000, 0x2000, 0, 1},
                                           {0x2000, 0x3000, 0x100, 3},
                                           {0x3000, 0x5000, 0x2000, 1},
                                           {0x6000, 0x7000, 0, 2}}));
  // One that starts before 2 and ends inside it.
  insert_replacing_overlaps(m, Range{0x5800, 0x6800, 0, 4});
  EXPECT_EQ(ranges(m).back(), (Range{0x6800, 0x7000, 0x800, 2}));
  EXPECT_EQ(ranges(m)[ranges(m).size() - 2], (Range{0x5800, 0x6800, 0, 4}));
  // The mapping before the new one ends inside it: trimmed, not kept whole.
  insert_replacing_overlaps(m, Range{0x4000, 0x5800, 0, 5});
  EXPECT_EQ(ranges(m)[2], (Range{0x3000, 0x4000, 0x2000, 1}));
  EXPECT_EQ(ranges(m)[3], (Range{0x4000, 0x5800, 0, 5}));
  insert_replacing_overlaps(m, Range{0x9000, 0x9000, 0, 6});  // empty: nothing
  EXPECT_EQ(m.size(), 6u);
}

}  // namespace
}  // namespace bpfprof
