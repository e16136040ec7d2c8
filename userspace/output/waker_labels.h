// Who woke a thread, said the way the profile and the summary say it: a thread as
// "comm (tid)", an interrupt by its kind and the function that did the waking
// ("interrupt: hrtimer_wakeup", from the waker's stack as written). Each thread gets its
// "Woken by" markers, each process its top wakers.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "userspace/model/session_model.h"
#include "userspace/output/profile_tables.h"

namespace bpfprof {

// Who ended a process's waits: a waker's label, the waiting time it ended and how often.
struct WakerTotal {
  std::string waker;
  double waited_ms = 0;
  uint64_t wakings = 0;
};
struct ProcessWakers {
  std::string process;          // "name (pid)"
  std::vector<WakerTotal> top;  // most waiting time first, at most five
};

// The frames of the profiler's own BPF programs and the tracepoint machinery under them.
bool is_tracing_function(const std::string& name);

class WakerLabels {
 public:
  // `output_stack_of`: the output stack of each model stack, in `shared`'s stack table.
  WakerLabels(const SessionModel& model, SharedTables& shared,
              const std::vector<StackIndex>& output_stack_of)
      : model_(model), shared_(shared), output_stack_of_(output_stack_of) {}

  // A "Woken by ..." marker for each of the thread's woken waits (ms since `zero`).
  void add_woken_markers(const Thread& thread, MonotonicNs zero, MarkersTable& markers);
  // The top wakers of the processes of `threads`, by the waiting time they ended: at most
  // five processes, most waiting time first.
  std::vector<ProcessWakers> top_wakers(const std::vector<const Thread*>& threads) const;

 private:
  std::optional<StackIndex> cause_stack(std::optional<StackId> stack) const;
  std::string waking_function(std::optional<StackIndex> cause) const;
  std::string interrupt_kind(std::optional<StackIndex> cause) const;
  std::string process_label(ProcessIndex index) const;
  std::string label(const Waker& waker, std::optional<StackIndex> cause) const;
  // The process's wakers by label, most waiting time first, and the waiting time of all.
  std::pair<uint64_t, ProcessWakers> process_wakers(ProcessIndex index) const;

  const SessionModel& model_;
  SharedTables& shared_;
  const std::vector<StackIndex>& output_stack_of_;
};

}  // namespace bpfprof
