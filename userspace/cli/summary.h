// The end-of-run summary on stderr: samples and losses, stack completeness, unwinding cost,
// code without symbols, top processes and functions; from the same report as the profile's
// meta.extra.
#pragma once

#include <cstdio>

#include "userspace/output/run_report.h"

namespace bpfprof {

// Prints the summary lines ("bpfprof: ..."), in the order a recording prints them.
void print_run_summary(const RunReport& report, FILE* out);

}  // namespace bpfprof
