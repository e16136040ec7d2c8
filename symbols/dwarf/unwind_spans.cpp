#include "symbols/dwarf/unwind_spans.h"

#include <time.h>

#include <algorithm>
#include <utility>

namespace bpfprof {
namespace {

bool same_rule(const UnwindRow& a, const UnwindRow& b) {
  return a.cfa_rule == b.cfa_rule && a.rbp_rule == b.rbp_rule && a.cfa_offset == b.cfa_offset &&
         a.rbp_offset == b.rbp_offset && a.rbx_rule == b.rbx_rule && a.rbx_offset == b.rbx_offset;
}

}  // namespace

UnwindBudget::UnwindBudget(const UnwindTableOptions& options)
    : max_rows_(options.max_rows), time_limit_(options.time_limit), start_(thread_cpu_time()) {}

std::chrono::nanoseconds UnwindBudget::thread_cpu_time() {
  timespec now{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return std::chrono::seconds(now.tv_sec) + std::chrono::nanoseconds(now.tv_nsec);
}

UnwindSpan unknown_span(uint64_t start, uint64_t end, UnwindGap gap) {
  UnwindSpan span{start, end, {}, gap};
  span.row.cfa_rule = BPFPROF_CFA_UNKNOWN;
  span.row.rbp_rule = BPFPROF_RBP_UNKNOWN;
  span.row.rbx_rule = BPFPROF_RBP_UNKNOWN;
  return span;
}

std::vector<CodeRange> uncovered_parts(const std::vector<CodeRange>& covered, CodeRange range) {
  std::vector<CodeRange> parts;
  auto it = std::upper_bound(covered.begin(), covered.end(), range.start,
                             [](uint64_t value, const CodeRange& r) { return value < r.start; });
  if (it != covered.begin()) --it;
  uint64_t from = range.start;
  for (; it != covered.end() && it->start < range.end; ++it) {
    if (it->end <= from) continue;
    if (it->start > from) parts.push_back({from, it->start});
    from = std::max(from, it->end);
  }
  if (from < range.end) parts.push_back({from, range.end});
  return parts;
}

namespace {

// Cuts spans[from..] so that none overlaps the one before (the earlier one wins) nor goes past
// kRowPcLimit; spans[..from) are disjoint already. In place: a large file's spans are tens of
// MB, and a copy's fresh pages cost more than the pass itself.
void cut_overlaps(std::vector<UnwindSpan>& spans, size_t from) {
  size_t kept = from;
  uint64_t covered_to = from > 0 ? spans[from - 1].end : 0;
  for (size_t i = from; i < spans.size(); ++i) {
    UnwindSpan& span = spans[i];
    const uint64_t start = std::max(span.start, covered_to);
    const uint64_t end = std::min(span.end, kRowPcLimit);
    if (start >= end) continue;
    if (kept != i) spans[kept] = span;
    spans[kept].start = start;
    spans[kept].end = end;
    ++kept;
    covered_to = end;
  }
  spans.resize(kept);
}

bool by_start(const UnwindSpan& a, const UnwindSpan& b) { return a.start < b.start; }

}  // namespace

// Spans come mostly in order (FDEs by address, then a few added rules): the sorted prefix is
// kept and only the rest sorted and merged in, which costs far less than sorting them all.
void normalize_spans(std::vector<UnwindSpan>& spans) {
  const auto tail = std::is_sorted_until(spans.begin(), spans.end(), by_start);
  std::stable_sort(tail, spans.end(), by_start);
  std::inplace_merge(spans.begin(), tail, spans.end(), by_start);
  cut_overlaps(spans, 0);
}

void merge_spans(std::vector<UnwindSpan>& spans, std::vector<UnwindSpan> more) {
  if (more.empty()) return;
  std::stable_sort(more.begin(), more.end(), by_start);
  const size_t had = spans.size();
  spans.resize(had + more.size());
  // From the back, into the room at the end: each span moves once, at most.
  auto out = spans.end();
  auto old_end = spans.begin() + static_cast<ptrdiff_t>(had);
  for (auto next = more.end(); next != more.begin();) {
    if (old_end != spans.begin() && by_start(*(next - 1), *(old_end - 1)))
      *--out = *--old_end;
    else
      *--out = *--next;
  }
  // What lies before the first added span was normalized and has not moved.
  const size_t first_added = static_cast<size_t>(old_end - spans.begin());
  cut_overlaps(spans, first_added);
}

std::vector<UnwindRow> rows_of_spans(const std::vector<UnwindSpan>& spans) {
  std::vector<UnwindRow> rows;
  rows.reserve(spans.size() + spans.size() / 8);  // a few spans are followed by a gap's row
  auto add = [&rows](uint64_t pc, const UnwindRow& rule) {
    if (!rows.empty() && same_rule(rows.back(), rule)) return;
    UnwindRow row = rule;
    row.pc = static_cast<uint32_t>(pc);
    rows.push_back(row);
  };
  const UnwindRow unknown = unknown_span(0, 0, UnwindGap::kNoCfi).row;
  for (size_t i = 0; i < spans.size(); ++i) {
    add(spans[i].start, spans[i].row);
    const bool next_follows = i + 1 < spans.size() && spans[i + 1].start == spans[i].end;
    if (!next_follows && spans[i].end < kRowPcLimit) add(spans[i].end, unknown);
  }
  return rows;
}

}  // namespace bpfprof
