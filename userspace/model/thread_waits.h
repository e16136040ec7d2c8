// Which waking ended each wait of one thread (off-CPU recording with wakers): a wait opens
// at a switch-out, the latest waking of the thread is noted, and when the thread runs again
// the two are matched. Also where the thread last waited, for switch-outs whose stack the
// kernel did not take again.
//
//   running  --switch-out-->  waiting since t, in a state
//   waiting  --a waking-->    waiting, the waking noted
//   waiting  --runs again-->  running; the wait ended by the noted waking, if one ended it
#pragma once

#include <optional>

#include "userspace/model/ids.h"
#include "userspace/model/recording.h"
#include "userspace/model/thread_accounting.h"

namespace bpfprof {

class ThreadWaits {
 public:
  struct Waking {
    MonotonicNs time;
    WakerId waker;
    std::optional<ProcessIndex> waker_process;  // the waker's process entry, if tracked
    std::optional<StackId> cause;               // the waker's stack, if taken
  };
  struct EndedWait {
    MonotonicNs since;
    MonotonicNs woken;  // when the waking came (not before the wait began)
    OffCpuState state;
    Waking waking;
  };

  void switched_out(MonotonicNs t, OffCpuState state);
  void woken(const Waking& waking) { last_waking_ = waking; }
  // The thread runs again at `t`: the wait that ends, if a waking ended it.
  std::optional<EndedWait> runs_again(MonotonicNs t);

  std::optional<StackId> last_stack() const { return last_stack_; }
  void set_last_stack(StackId stack) { last_stack_ = stack; }

  // The stacks and process entries it keeps, as a compaction renumbers them.
  template <typename Move>
  void move_stacks(Move&& move) {
    if (last_stack_) last_stack_ = move(*last_stack_);
    if (last_waking_ && last_waking_->cause) last_waking_->cause = move(*last_waking_->cause);
  }
  template <typename MoveProcess>
  void move_processes(MoveProcess&& move) {
    if (last_waking_) move(last_waking_->waker_process);
  }

 private:
  struct OpenWait {
    MonotonicNs since;
    OffCpuState state;
  };
  std::optional<OpenWait> open_;
  std::optional<Waking> last_waking_;
  std::optional<StackId> last_stack_;  // where the thread last waited, without the state frame
};

}  // namespace bpfprof
