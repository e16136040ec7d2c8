// SessionModel's replay: a recording's events and samples taken in time order, all at once
// or as the recording goes, each sample given to its thread's accounting.
#include "userspace/model/session_model.h"

#include <cmath>
#include <cstdlib>

#include <algorithm>
#include <utility>

namespace bpfprof {

void SessionModel::configure_for(const Recording& recording) {
  configure(recording.frequency_hz ? 1000000000ull / recording.frequency_hz : 1000000,
            recording.off_cpu);
  wake_threshold_ns_ = recording.wake_threshold_ns;
  allocation_period_ = recording.allocation_period;
}

int64_t sampled_block_weight(uint64_t bytes, uint64_t period) {
  if (!period || !bytes) return static_cast<int64_t>(bytes);
  const double b = static_cast<double>(bytes);
  return static_cast<int64_t>(std::llround(b / -std::expm1(-b / static_cast<double>(period))));
}

void SessionModel::consume(Recording& recording, MonotonicNs until) {
  take_wakers(recording.wakers);
  // What is left after a call is sorted; what arrived since is nearly in order (CPUs'
  // events interleave within microseconds), so each new item moves back a step or two at
  // most: insertion, stable for equal times, instead of sorting the whole window each time.
  auto sort_new_and_split = [&](auto& items, size_t already_sorted) {
    for (size_t i = std::min(already_sorted, items.size()); i < items.size(); ++i)
      for (size_t j = i; j > 0 && items[j - 1].time > items[j].time; --j)
        std::swap(items[j - 1], items[j]);
    return std::partition_point(items.begin(), items.end(),
                                [&](const auto& item) { return item.time <= until; });
  };
  // Arrivals at or before the time the model already took: counted, then applied late.
  auto count_late = [&](const auto& items, size_t already_seen) {
    if (!taken_until_) return;
    for (size_t i = already_seen; i < items.size(); ++i)
      if (items[i].time <= *taken_until_) ++recording.stats.late_events;
  };
  count_late(recording.events, sorted_pending_events_);
  count_late(recording.samples, sorted_pending_samples_);
  auto events_end = sort_new_and_split(recording.events, sorted_pending_events_);
  auto samples_end = sort_new_and_split(recording.samples, sorted_pending_samples_);
  auto sample = recording.samples.begin();
  for (auto e = recording.events.begin(); e != events_end; ++e) {
    // An event at the same time as a sample comes first: a fork precedes the child's samples.
    for (; sample != samples_end && sample->time < e->time; ++sample)
      add_sample(*sample, recording.raw_stacks);
    apply(e->time, e->payload);
  }
  for (; sample != samples_end; ++sample) add_sample(*sample, recording.raw_stacks);
  recording.events.erase(recording.events.begin(), events_end);
  recording.samples.erase(recording.samples.begin(), samples_end);
  sorted_pending_events_ = recording.events.size();
  sorted_pending_samples_ = recording.samples.size();
  if (until.value != UINT64_MAX) taken_until_ = until;
}

void SessionModel::replay(const Recording& recording) {
  configure_for(recording);
  take_wakers(recording.wakers);
  // Stable sorts: events that share a timestamp keep the order they arrived in.
  std::vector<const LifecycleEvent*> events;
  events.reserve(recording.events.size());
  for (const auto& e : recording.events) events.push_back(&e);
  std::stable_sort(events.begin(), events.end(),
                   [](const auto* a, const auto* b) { return a->time < b->time; });
  std::vector<const SampleRecord*> samples;
  samples.reserve(recording.samples.size());
  for (const auto& s : recording.samples) samples.push_back(&s);
  std::stable_sort(samples.begin(), samples.end(),
                   [](const auto* a, const auto* b) { return a->time < b->time; });

  size_t next_sample = 0;
  for (const LifecycleEvent* e : events) {
    // An event at the same time as a sample comes first: a fork precedes the child's samples.
    while (next_sample < samples.size() && samples[next_sample]->time < e->time)
      add_sample(*samples[next_sample++], recording.raw_stacks);
    apply(e->time, e->payload);
  }
  while (next_sample < samples.size()) add_sample(*samples[next_sample++], recording.raw_stacks);
  finish(recording.end_time);
}

void SessionModel::finish(MonotonicNs end) {
  for (Thread& th : threads_) {
    const MonotonicNs thread_end = th.end && *th.end < end ? *th.end : end;
    th.accounting.finish(rules_, thread_end, th.samples);
    // The kernel's exit path runs on after the exit event, and can wait for a CPU there: the
    // thread ends when its last sample does.
    if (th.end && !th.samples.empty()) {
      const ThreadSample& last = th.samples.back();
      const auto last_end =
          last.time.value +
          static_cast<uint64_t>(last.weight * static_cast<double>(rules_.interval_ns));
      if (last_end > th.end->value) th.end = MonotonicNs{last_end};
    }
  }
}

void SessionModel::add_sample(const SampleRecord& sample, const RawStackTree& raw_stacks) {
  const ThreadIndex ti = live_thread(sample.time, sample.pid, sample.tid);
  Thread& th = thread(ti);
  if (sample.kind == SampleKind::kWaking) return note_waking(th, sample, raw_stacks);
  if (sample.kind == SampleKind::kPageFault) {
    th.allocations.push_back({sample.time, resolve(sample.pid, sample.stack, raw_stacks),
                              static_cast<int64_t>(kPageFaultSampleBytes)});
    return;
  }
  if (sample.kind == SampleKind::kAllocatorCall) return add_allocator_call(ti, sample, raw_stacks);
  if (sample.kind == SampleKind::kAddressSpaceCall) {
    const AddressSpaceCall& call = sample.address_space_call;
    const int64_t bytes = sampled_block_weight(static_cast<uint64_t>(std::abs(call.change)),
                                               BPFPROF_ADDRESS_SPACE_PERIOD);
    th.address_space_calls.push_back({sample.time, resolve(sample.pid, sample.stack, raw_stacks),
                                      call, call.change < 0 ? -bytes : bytes});
    return;
  }
  // Whatever comes next from a waiting thread, it runs again.
  const std::optional<ThreadWaits::EndedWait> ended = end_wait(th, sample.time);
  switch (sample.kind) {
    case SampleKind::kOnCpu:
      th.accounting.on_cpu_sample(rules_, sample.time, sample.cpu_time,
                                  resolve(sample.pid, sample.stack, raw_stacks), th.samples);
      break;
    case SampleKind::kSwitchOut:
      th.accounting.switched_out(rules_, sample.time, sample.cpu_time,
                                 off_cpu_stack(th, sample, raw_stacks), th.samples);
      if (rules_.off_cpu) th.waits.switched_out(sample.time, sample.off_cpu_state);
      break;
    case SampleKind::kSwitchIn:
      th.accounting.switched_in(rules_, sample.time, th.samples,
                                runnable_after(th, ended, sample.time));
      break;
    case SampleKind::kWaking:
    case SampleKind::kPageFault:
    case SampleKind::kAllocatorCall:
    case SampleKind::kAddressSpaceCall:
      break;
  }
}

// A block freed, then one allocated (realloc does both), in that order: the front end matches
// a free with the last block allocated at its address before it in the table, and a realloc
// may give the same address back. The freed block weighs what it weighed when allocated, so
// that the two rows cancel; its free goes in the table of the thread that allocated it.
void SessionModel::add_allocator_call(ThreadIndex ti, const SampleRecord& sample,
                                      const RawStackTree& raw_stacks) {
  const AllocatorCall& call = sample.allocator_call;
  const StackId stack = resolve(sample.pid, sample.stack, raw_stacks);
  if (call.freed_address) {
    ThreadIndex owner = ti;
    std::optional<Tid> by_thread;
    if (auto found = block_owners_.find({sample.pid, call.freed_address});
        found != block_owners_.end()) {
      owner = found->second;
      if (owner != ti) by_thread = sample.tid;
      block_owners_.erase(found);
    }
    thread(owner).allocations.push_back(
        {sample.time, stack, -sampled_block_weight(call.freed_bytes, allocation_period_),
         call.freed_address, by_thread});
  }
  if (call.address) {
    thread(ti).allocations.push_back(
        {sample.time, stack, sampled_block_weight(call.bytes, allocation_period_), call.address});
    block_owners_[{sample.pid, call.address}] = ti;
  }
}

std::vector<ThreadIndex> SessionModel::display_order() const {
  std::vector<ProcessIndex> order;
  for (uint32_t i = 0; i < processes_.size(); ++i) order.push_back(ProcessIndex{i});
  std::stable_sort(order.begin(), order.end(), [&](ProcessIndex a, ProcessIndex b) {
    return processes_[a.value].start < processes_[b.value].start;
  });
  std::vector<ThreadIndex> result;
  for (ProcessIndex pi : order) {
    const Process& p = processes_[pi.value];
    std::vector<ThreadIndex> threads = p.threads;
    std::stable_sort(threads.begin(), threads.end(), [&](ThreadIndex a, ThreadIndex b) {
      bool a_main = threads_[a.value].tid.value == p.pid.value;
      bool b_main = threads_[b.value].tid.value == p.pid.value;
      if (a_main != b_main) return a_main;
      return threads_[a.value].start < threads_[b.value].start;
    });
    result.insert(result.end(), threads.begin(), threads.end());
  }
  return result;
}

}  // namespace bpfprof
