// A Runtime (runtimes/runtime.h) made of two parts: `Processes`, which finds the runtime's
// processes (a RuntimeProcesses), and `Stacks`, which takes the frame events and merges them
// (made from the processes, with take_event, has_frames_for, merge_into and forget). What the
// kernel side is told stays the runtime's own (apply_kernel_changes).
#pragma once

#include <cstddef>
#include <cstdint>
#include <unordered_set>
#include <vector>

#include "runtimes/runtime.h"

namespace bpfprof {

template <typename Processes, typename Stacks>
class SplitRuntime : public Runtime {
 public:
  // `map`: the BPF map of the runtime's processes.
  SplitRuntime(RuntimeKind kind, const char* map) : kind_(kind), map_(map) {}

  RuntimeKind kind() const override { return kind_; }
  void observe(const std::vector<LifecycleEvent>& events, size_t from,
               Recording& recording) override {
    processes_.observe(events, from, stats(recording));
  }
  void forget_exited() override {
    for (Pid pid : processes_.forget_exited()) stacks_.forget(pid);
  }
  void take_event(const void* data, size_t size, Recording& recording) override {
    stacks_.take_event(data, size, stats(recording));
  }
  void merge_into(Pid pid, Tid tid, MonotonicNs time, std::vector<uint64_t>& user,
                  Recording& recording) override {
    if (stacks_.has_frames_for(tid)) stacks_.merge_into(pid, tid, time, user, recording);
  }

 protected:
  RuntimeStats& stats(Recording& recording) const { return recording.stats.runtimes[kind_]; }
  // The processes found or gone into the kernel's map (apply_process_changes).
  template <typename Change>
  void apply(RuntimeKernelMaps& maps, const std::vector<Change>& changes, Recording& recording) {
    apply_process_changes(maps, map_, kind_, changes, in_kernel_, stats(recording));
  }

  Processes processes_;
  Stacks stacks_{processes_};

 private:
  RuntimeKind kind_;
  const char* map_;
  std::unordered_set<Pid> in_kernel_;  // the entries of the kernel's map
};

}  // namespace bpfprof
