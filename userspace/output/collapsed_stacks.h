// Folded stacks for flamegraph.pl, inferno and speedscope, from the built profile tables.
#pragma once

#include "userspace/output/output_file.h"
#include "userspace/output/profile_builder.h"

namespace bpfprof {

// "process (pid);thread;outermost;...;innermost COUNT", one line per unique stack, sorted,
// counts in sampling intervals (a timer sample is 1, a wait its length), rounded.
void write_collapsed_stacks(const BuiltProfile& profile, OutputSink& sink);

}  // namespace bpfprof
