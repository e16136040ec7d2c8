// What /proc says about a running process when the recording attaches to it: its threads
// with their names and CPU time so far, its executable and its executable mappings.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "symbols/util/proc_maps.h"
#include "userspace/model/ids.h"
#include "userspace/model/recording.h"

namespace bpfprof {

struct ProcessSnapshot {
  Pid pid;
  std::string comm;
  std::string executable;  // /proc/PID/exe, empty for kernel threads
  std::vector<ThreadState> threads;
  std::vector<MapEntry> executable_mappings;
  std::optional<uint32_t> euid;  // effective user
};

// Reads /proc/PID. nullopt when the process does not exist (or is gone meanwhile);
// `error` then says why in one line.
std::optional<ProcessSnapshot> snapshot_process(Pid pid, std::string* error = nullptr);

// Every process in /proc now.
std::vector<Pid> list_processes();

// Appends the events that make the model know `snapshot` at `time`.
void append_snapshot_events(MonotonicNs time, ProcessSnapshot snapshot,
                            std::vector<LifecycleEvent>& out);

}  // namespace bpfprof
