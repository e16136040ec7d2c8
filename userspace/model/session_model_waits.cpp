// SessionModel's waits: the off-CPU stacks threads wait in, the wakings that end the waits,
// and the share of waiting time each waker ended.
#include "userspace/model/session_model.h"

namespace bpfprof {

void SessionModel::take_wakers(const WakerTable& table) {
  for (uint32_t i = static_cast<uint32_t>(wakers_.size()); i < table.size(); ++i)
    wakers_.intern(table[WakerId{i}]);
}

void SessionModel::note_waking(Thread& th, const SampleRecord& waking,
                               const RawStackTree& raw_stacks) {
  const Waker& waker = wakers_[waking.waker];
  ThreadWaits::Waking noted{waking.time, waking.waker, std::nullopt, std::nullopt};
  if (waker.context == WakerContext::kThread)
    if (auto it = live_processes_.find(waker.pid); it != live_processes_.end())
      noted.waker_process = it->second;
  if (waking.stack != RawStackTree::kRoot)
    noted.cause = resolve(waker.pid, waking.stack, raw_stacks);
  th.waits.woken(noted);
}

// The waiting for a CPU between the waking that ended a wait and the switch-in at `t`, when
// the accounting shows it apart (a busy machine's doing, not the wait's): its stack is
// interned only then.
std::optional<ThreadAccounting::Runnable> SessionModel::runnable_after(
    const Thread& th, const std::optional<ThreadWaits::EndedWait>& ended, MonotonicNs t) {
  if (!ended || !th.waits.last_stack() ||
      !ThreadAccounting::waits_for_cpu_apart(rules_, ended->woken, t))
    return std::nullopt;
  return ThreadAccounting::Runnable{
      ended->woken,
      stacks_.intern(*th.waits.last_stack(), FrameKey::off_cpu(OffCpuState::kWaitingForCpu))};
}

std::optional<ThreadWaits::EndedWait> SessionModel::end_wait(Thread& th, MonotonicNs t) {
  const std::optional<ThreadWaits::EndedWait> wait = th.waits.runs_again(t);
  if (!wait) return wait;
  const ThreadWaits::Waking& waking = wait->waking;
  const uint64_t waited = wait->woken.value - wait->since.value;
  Process& p = process(th.process);
  const bool by_thread = wakers_[waking.waker].context == WakerContext::kThread;
  const StackId cause = waking.cause.value_or(ResolvedStackTree::kRoot);
  WakerShare& share = by_thread ? p.wakers[waking.waker] : p.interrupt_wakers[cause];
  share.waited_ns += waited;
  ++share.wakings;
  if (wakers_by_second_) {
    WakerSecond& bucket = waker_second(p.waker_seconds, wait->woken);
    WakerShare& in_second =
        by_thread ? bucket.wakers[waking.waker] : bucket.interrupt_wakers[cause];
    in_second.waited_ns += waited;
    ++in_second.wakings;
  }
  if (waited >= wake_threshold_ns())
    th.woken_waits.push_back(WokenWait{wait->since, wait->woken, wait->state, waking.waker,
                                       waking.waker_process, waking.cause});
  return wait;
}

// Where the thread waits, ending in its off-CPU state frame.
StackId SessionModel::off_cpu_stack(Thread& th, const SampleRecord& switch_out,
                                    const RawStackTree& raw_stacks) {
  StackId where;
  if (switch_out.reuses_last_stack && th.waits.last_stack()) {
    where = *th.waits.last_stack();
  } else {
    where = resolve(switch_out.pid, switch_out.stack, raw_stacks);
    th.waits.set_last_stack(where);
  }
  return stacks_.intern(where, FrameKey::off_cpu(switch_out.off_cpu_state));
}

void SessionModel::clear_waker_totals() {
  for (Process& p : processes_) {
    p.wakers.clear();
    p.interrupt_wakers.clear();
    p.waker_seconds.clear();
  }
}

}  // namespace bpfprof
