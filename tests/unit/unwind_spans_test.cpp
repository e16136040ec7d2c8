// Spans into a table's order (symbols/dwarf/unwind_spans.h): normalize_spans sorts them and cuts
// overlaps (the span that starts first wins, the one given first at an equal start), and
// merge_spans adds spans to normalized ones with the same result as normalizing them all.
#include "symbols/dwarf/unwind_spans.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

namespace bpfprof {
namespace {

UnwindSpan span(uint64_t start, uint64_t end, int32_t cfa_offset) {
  UnwindSpan s;
  s.start = start;
  s.end = end;
  s.row.cfa_rule = BPFPROF_CFA_RSP;
  s.row.cfa_offset = cfa_offset;
  return s;
}

struct Piece {
  uint64_t start, end;
  int32_t cfa_offset;
  bool operator==(const Piece&) const = default;
};

std::vector<Piece> pieces(const std::vector<UnwindSpan>& spans) {
  std::vector<Piece> out;
  for (const UnwindSpan& s : spans) out.push_back({s.start, s.end, s.row.cfa_offset});
  return out;
}

TEST(UnwindSpans, NormalizeCutsOverlapsInFavourOfTheEarlierStart) {
  std::vector<UnwindSpan> spans = {span(0x40, 0x60, 3), span(0x10, 0x30, 1), span(0x20, 0x50, 2),
                                   span(0x40, 0x48, 4),
                                   span(kRowPcLimit - 0x10, kRowPcLimit + 0x10, 5)};
  normalize_spans(spans);
  EXPECT_EQ(pieces(spans), (std::vector<Piece>{{0x10, 0x30, 1},
                                               {0x30, 0x50, 2},
                                               {0x50, 0x60, 3},
                                               {kRowPcLimit - 0x10, kRowPcLimit, 5}}));
}

// Random spans, many overlapping, some at equal starts, some past the 32-bit limit: adding a
// few to normalized ones gives what normalizing the whole list gives.
TEST(UnwindSpans, MergeEqualsNormalizingEverything) {
  std::mt19937_64 random(54);
  auto random_span = [&random](int32_t tag) {
    const uint64_t start = random() % 2 ? random() % 4096 : kRowPcLimit - 64 + random() % 128;
    return span(start, start + 1 + random() % 64, tag);
  };
  for (int round = 0; round < 2000; ++round) {
    std::vector<UnwindSpan> spans, more;
    for (int i = static_cast<int>(random() % 200); i > 0; --i) spans.push_back(random_span(i));
    for (int i = static_cast<int>(random() % 12); i > 0; --i) more.push_back(random_span(-i));
    if (round % 5 == 0 && !spans.empty()) more.push_back(spans[random() % spans.size()]);
    normalize_spans(spans);
    std::vector<UnwindSpan> expected = spans;
    expected.insert(expected.end(), more.begin(), more.end());
    normalize_spans(expected);
    merge_spans(spans, more);
    ASSERT_EQ(pieces(spans), pieces(expected)) << "round " << round;
  }
}

}  // namespace
}  // namespace bpfprof
