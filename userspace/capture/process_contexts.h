// The context of the processes a recording learns of (their container, pod or service),
// read from /proc while they run.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "userspace/model/ids.h"
#include "userspace/model/process_context.h"
#include "userspace/model/recording.h"

namespace bpfprof {

// From /proc/PID/cgroup and /proc/PID/status (`proc` is the procfs root); nullopt when the
// process is gone.
std::optional<ProcessContext> read_process_context(Pid pid, const std::string& proc = "/proc");

// For each exec and each process found running (-p, -a) among events[from, end): the
// process's context, read now (after its exec a container's process stays in the cgroup its
// runtime put it in), appended as a ProcessContextEvent at that event's time. A process gone
// by then keeps its parent's.
void append_process_contexts(std::vector<LifecycleEvent>& events, size_t from,
                             const std::string& proc = "/proc");

}  // namespace bpfprof
