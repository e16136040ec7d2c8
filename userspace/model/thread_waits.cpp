#include "userspace/model/thread_waits.h"

#include <algorithm>
#include <utility>

namespace bpfprof {

namespace {

// A waking this much before the switch-out still ended that wait: the waker may run
// try_to_wake_up on another CPU while the sleeper is still on its way off its own.
constexpr uint64_t kWakingBeforeSwitchOutNs = 100000;

}  // namespace

void ThreadWaits::switched_out(MonotonicNs t, OffCpuState state) {
  open_ = OpenWait{t, state};
  if (last_waking_ && last_waking_->time.value + kWakingBeforeSwitchOutNs < t.value)
    last_waking_.reset();  // it woke the thread while it ran: it ended no wait
}

std::optional<ThreadWaits::EndedWait> ThreadWaits::runs_again(MonotonicNs t) {
  if (!open_) return std::nullopt;
  const OpenWait wait = *std::exchange(open_, std::nullopt);
  const std::optional<Waking> waking = std::exchange(last_waking_, std::nullopt);
  // A preempted thread is runnable: nothing wakes it (a waking then is one that came while
  // it ran).
  if (!waking || wait.state == OffCpuState::kWaitingForCpu || waking->time > t ||
      waking->time.value + kWakingBeforeSwitchOutNs < wait.since.value)
    return std::nullopt;
  return EndedWait{wait.since, std::max(waking->time, wait.since), wait.state, *waking};
}

}  // namespace bpfprof
