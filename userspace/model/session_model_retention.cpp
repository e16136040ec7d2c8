// What SessionModel keeps over a long run: samples and woken waits before a time dropped,
// processes and threads that ended forgotten, stack trees compacted to the stacks in use.
#include "userspace/model/session_model.h"

#include <algorithm>
#include <utility>

namespace bpfprof {

void SessionModel::drop_samples_before(MonotonicNs t) {
  for (Thread& th : threads_) {
    std::erase_if(th.allocations, [&](const ThreadAllocation& a) { return a.time < t; });
    std::erase_if(th.address_space_calls,
                  [&](const ThreadAddressSpaceCall& c) { return c.time < t; });
    std::erase_if(th.woken_waits, [&](const WokenWait& w) { return w.woken < t; });
    if (th.samples.empty()) continue;
    const MonotonicNs last = th.samples.back().time;
    std::vector<ThreadSample> kept;
    kept.reserve(th.samples.size());
    for (const ThreadSample& s : th.samples)
      if (std::optional<ThreadSample> part = sample_part_from(s, t, rules_.interval_ns))
        kept.push_back(*part);
    th.samples = std::move(kept);
    if (th.samples.empty()) th.accounting.samples_dropped(last);
    if (th.samples.capacity() > 2 * th.samples.size() + 1024) th.samples.shrink_to_fit();
  }
  for (Process& p : processes_)
    forget_waker_seconds_before(p.waker_seconds, p.wakers, p.interrupt_wakers, t);
}

namespace {

// Where each kept entry of a vector goes once the others are removed (nullopt: removed).
template <typename Index, typename T, typename Gone>
std::vector<std::optional<Index>> remove_and_renumber(std::vector<T>& items, Gone gone) {
  std::vector<std::optional<Index>> moved(items.size());
  size_t kept = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    if (gone(i)) continue;
    moved[i] = Index{static_cast<uint32_t>(kept)};
    if (kept != i) items[kept] = std::move(items[i]);
    ++kept;
  }
  items.erase(items.begin() + static_cast<std::ptrdiff_t>(kept), items.end());
  return moved;
}

template <typename Map, typename Index>
void renumber_map(Map& map, const std::vector<std::optional<Index>>& moved) {
  std::erase_if(map, [&](const auto& entry) { return !moved[entry.second.value]; });
  for (auto& [key, index] : map) index = *moved[index.value];
}

}  // namespace

void SessionModel::forget_ended_before(MonotonicNs t) {
  auto thread_gone = [&](size_t i) {
    const Thread& th = threads_[i];
    return th.end && *th.end < t && th.samples.empty() && th.woken_waits.empty() &&
           th.allocations.empty() && th.address_space_calls.empty();
  };
  std::vector<bool> threads_gone(threads_.size());
  for (size_t i = 0; i < threads_.size(); ++i) threads_gone[i] = thread_gone(i);
  auto process_gone = [&](size_t i) {
    const Process& p = processes_[i];
    return p.end && *p.end < t && !live_processes_.contains(p.pid) &&
           std::all_of(p.threads.begin(), p.threads.end(),
                       [&](ThreadIndex ti) { return threads_gone[ti.value]; });
  };
  const auto processes_moved =
      remove_and_renumber<ProcessIndex>(processes_, [&](size_t i) { return process_gone(i); });
  const auto threads_moved =
      remove_and_renumber<ThreadIndex>(threads_, [&](size_t i) { return threads_gone[i]; });
  auto process_moved = [&](std::optional<ProcessIndex>& index) {
    if (index) index = processes_moved[index->value];
  };
  for (Thread& th : threads_) {
    th.process = *processes_moved[th.process.value];  // a kept thread keeps its process
    for (WokenWait& w : th.woken_waits) process_moved(w.waker_process);
    th.waits.move_processes(process_moved);
  }
  for (Process& p : processes_) {
    std::erase_if(p.threads, [&](ThreadIndex ti) { return !threads_moved[ti.value]; });
    for (ThreadIndex& ti : p.threads) ti = *threads_moved[ti.value];
  }
  renumber_map(live_processes_, processes_moved);
  renumber_map(live_threads_, threads_moved);
  renumber_map(exited_threads_, threads_moved);
  renumber_map(block_owners_, threads_moved);
}

void SessionModel::compact_stacks(
    Recording& recording, const std::function<void(const RawStackMove&)>& other_raw_stacks) {
  ResolvedStackTree stacks;
  std::unordered_map<StackId, StackId> moved;
  auto move = [&](StackId id) {
    auto [it, inserted] = moved.try_emplace(id, id);
    if (inserted) it->second = stacks.copy_path(stacks_, id);
    return it->second;
  };
  for (Thread& th : threads_) {
    for (ThreadSample& s : th.samples) s.stack = move(s.stack);
    for (ThreadAllocation& a : th.allocations) a.stack = move(a.stack);
    for (ThreadAddressSpaceCall& c : th.address_space_calls) c.stack = move(c.stack);
    th.accounting.move_stacks(move);
    th.waits.move_stacks(move);
    for (WokenWait& w : th.woken_waits)
      if (w.cause) w.cause = move(*w.cause);
  }
  for (Process& p : processes_) {
    move_share_stacks(p.interrupt_wakers, move);
    for (WakerSecond& second : p.waker_seconds) move_share_stacks(second.interrupt_wakers, move);
  }
  stacks_ = std::move(stacks);
  compact_raw_stacks(recording, other_raw_stacks);
}

void SessionModel::compact_raw_stacks(
    Recording& recording, const std::function<void(const RawStackMove&)>& other_raw_stacks) {
  resolver_.clear();
  RawStackTree raw;
  std::unordered_map<RawStackId, RawStackId> raw_moved;
  auto move_raw = [&](RawStackId id) {
    auto [it, inserted] = raw_moved.try_emplace(id, id);
    if (inserted) it->second = raw.copy_path(recording.raw_stacks, id);
    return it->second;
  };
  for (SampleRecord& s : recording.samples) s.stack = move_raw(s.stack);
  if (other_raw_stacks) other_raw_stacks(move_raw);
  recording.raw_stacks = std::move(raw);
}

}  // namespace bpfprof
