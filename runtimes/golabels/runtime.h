// Go's goroutine labels as a runtime (runtimes/runtime.h): the Go programs that set them found
// by runtimes/golabels/processes.h, the running goroutine's label set read at each sample by
// runtimes/golabels/frames.bpf.h, and put at the root of the sample's stack as one frame
// (userspace/model/label_set.h), which pprof output turns back into sample labels.
#pragma once

#include <memory>

#include "runtimes/golabels/events.h"
#include "runtimes/runtime.h"
#include "userspace/model/label_set.h"

namespace bpfprof {

// The set an event holds: its pairs, each key and value as sent (cut at the event's bounds,
// marked with "…"), sorted by key as Go 1.24 keeps them (a map's order is its hashing's).
// `count` pairs of `frames` are used.
LabelSet label_set_of(const bpfprof_golabels_stack_event& event, size_t count);

std::unique_ptr<Runtime> make_golabels_runtime();

}  // namespace bpfprof
