// What /proc says about a running process when the recording attaches to it: its threads
// with their names and CPU time so far, its executable and its executable mappings.
#pragma once

#include <optional>
#include <string>
#include <string_view>
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

// A process's resident memory now (/proc/PID/statm: file, anonymous and shared pages), in
// bytes; nullopt when it cannot be read.
std::optional<uint64_t> resident_bytes_now(Pid pid);

// Every process in /proc now.
std::vector<Pid> list_processes();

// The processes now running whose parent, or parent's parent and so on, is one of `roots`
// (a server's workers, a shell's jobs), from each process's parent in /proc/N/stat; the roots
// themselves not included.
std::vector<Pid> descendants_of(const std::vector<Pid>& roots);

// The parent in a /proc/N/stat line ("pid (comm) state ppid ..."; comm may hold anything, the
// last ')' ends it); nullopt for a line that is not one.
std::optional<Pid> parent_in_stat(std::string_view stat);

// Appends the events that make the model know `snapshot` at `time`.
void append_snapshot_events(MonotonicNs time, ProcessSnapshot snapshot,
                            std::vector<LifecycleEvent>& out);

}  // namespace bpfprof
