// The end-of-run summary on stderr: samples and losses, stack completeness, unwinding cost,
// code without symbols, top processes and functions; from the same report as the profile's
// meta.extra.
#pragma once

#include <cstdint>
#include <cstdio>

#include "userspace/output/run_report.h"

namespace bpfprof {

enum class SummaryDetail : uint8_t {
  // What was recorded, problems only when there are any (each with its fix, at most
  // kBriefProblemLines), the top functions on one line.
  kBrief,
  // Every figure (-v): unwinding, stack sources, Python, processes, wakers.
  kFull,
};

// With the recording's first and last lines (recording ended, wrote), a brief summary keeps
// a plain record within 8 lines.
inline constexpr size_t kBriefProblemLines = 4;

// Prints the summary lines ("bpfprof: ..."), in the order a recording prints them.
void print_run_summary(const RunReport& report, SummaryDetail detail, FILE* out);

}  // namespace bpfprof
