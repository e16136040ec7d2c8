// What the unwind table builder (unwind_table.h) assembles a file's table from: spans of code
// that each hold one rule, in the file's virtual addresses, and the bounds of one build. Each
// source of rules adds spans: the CFI (cfi_spans.h), Go's own tables (go_spans.h), what is
// known of code without CFI (no_cfi_spans.h) and the instructions of the gaps left
// (code_gaps.h). normalize_spans makes them sorted and disjoint, rows_of_spans turns them into
// the table's rows.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "symbols/dwarf/cfi_functions.h"
#include "symbols/dwarf/unwind_table.h"

namespace bpfprof {

// A row's pc is 32 bits: no span reaches past this.
inline constexpr uint64_t kRowPcLimit = uint64_t{1} << 32;

// The bounds of UnwindTableOptions, checked inside every loop of the build. The CPU clock is a
// system call and a check can come every few nanoseconds (the coverage count's loop): it is
// read once per kChecksPerClockRead checks, none of which does more than a row's or an FDE's
// work. The wall clock is not read at all: the bound is the building thread's CPU time.
class UnwindBudget {
 public:
  explicit UnwindBudget(const UnwindTableOptions& options);

  // Whether the build must stop, holding `rows` rows so far; once true, always true. Inline:
  // the build's loops call it for every row.
  bool spent(size_t rows = 0) {
    if (error_) return true;
    if (rows > max_rows_) {
      error_ = UnwindTableError::kTooManyRows;
    } else if (++checks_ % kChecksPerClockRead == 0 && thread_cpu_time() - start_ >= time_limit_) {
      error_ = UnwindTableError::kTooSlow;
    }
    return error_.has_value();
  }
  std::optional<UnwindTableError> error() const { return error_; }
  uint64_t max_rows() const { return max_rows_; }
  // The calling thread's CPU time: a table's cost, not how busy the machine is.
  static std::chrono::nanoseconds thread_cpu_time();

 private:
  static constexpr uint64_t kChecksPerClockRead = 1024;

  uint64_t max_rows_;
  std::chrono::nanoseconds time_limit_;
  std::chrono::nanoseconds start_;
  uint64_t checks_ = 0;
  std::optional<UnwindTableError> error_;
};

// One rule over [start, end) (or a gap); `gap` says why when the rule is UNKNOWN.
struct UnwindSpan {
  uint64_t start = 0;
  uint64_t end = 0;
  UnwindRow row{};
  UnwindGap gap = UnwindGap::kNoCfi;
};

// A span of rule UNKNOWN for the reason `gap`.
UnwindSpan unknown_span(uint64_t start, uint64_t end, UnwindGap gap);

// The parts of `range` that no range of `covered` (sorted, not overlapping) holds.
std::vector<CodeRange> uncovered_parts(const std::vector<CodeRange>& covered, CodeRange range);

// Sorts the spans and makes them disjoint (where spans overlap, the one starting first wins),
// cut at kRowPcLimit.
void normalize_spans(std::vector<UnwindSpan>& spans);

// Adds `more` to normalized `spans` as normalize_spans would (at an equal start the span
// already there first), moving each span once and with no second buffer: a large library's
// spans are tens of MB, and its few inferred spans cost a sort and a merge buffer of them all.
void merge_spans(std::vector<UnwindSpan>& spans, std::vector<UnwindSpan> more);

// The table's rows of normalized spans: one row where a span starts, an UNKNOWN row where one
// ends and the next does not start at once, consecutive identical rules merged.
std::vector<UnwindRow> rows_of_spans(const std::vector<UnwindSpan>& spans);

}  // namespace bpfprof
