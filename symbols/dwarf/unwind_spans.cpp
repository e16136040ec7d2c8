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

// Spans come mostly in order (FDEs by address, then a few added rules): the sorted prefix is
// kept and only the rest sorted and merged in, which costs far less than sorting them all.
void normalize_spans(std::vector<UnwindSpan>& spans) {
  const auto by_start = [](const UnwindSpan& a, const UnwindSpan& b) { return a.start < b.start; };
  const auto tail = std::is_sorted_until(spans.begin(), spans.end(), by_start);
  std::stable_sort(tail, spans.end(), by_start);
  std::inplace_merge(spans.begin(), tail, spans.end(), by_start);
  // In place: a large file's spans are tens of MB, and a copy's fresh pages cost more than the
  // pass itself.
  size_t kept = 0;
  uint64_t covered_to = 0;
  for (UnwindSpan span : spans) {
    span.start = std::max(span.start, covered_to);
    span.end = std::min(span.end, kRowPcLimit);
    if (span.start >= span.end) continue;
    spans[kept++] = span;
    covered_to = span.end;
  }
  spans.resize(kept);
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
