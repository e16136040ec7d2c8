// Where the recording's user stacks came from and what they cost, as labelled text: the
// end-of-run summary and the profile's meta.extra print the same entries.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "userspace/model/recording.h"

namespace bpfprof {

// (label, value) pairs: the kernel / fallback split of timer samples' user stacks (with
// --call-graph dwarf), ring-buffer bytes per sample (always), and the unwind tables' builds,
// map memory, bounds hit and fallback reasons.
std::vector<std::pair<std::string, std::string>> stack_source_report(const Recording& recording);

}  // namespace bpfprof
