#include "userspace/model/session_model.h"

#include "symbols/util/mapping_kind.h"
#include "symbols/util/text.h"

#include <algorithm>
#include <utility>

namespace bpfprof {

// Enough for the exits that can come between one and its process's last samples (the model
// takes events in time order; those samples follow the exit by microseconds).
constexpr size_t kExitedSpacesKept = 64;

SessionModel::SessionModel() {
  libraries_.push_back(Library{.path = "[kernel.kallsyms]"});  // kKernelLib
}

void SessionModel::configure_for(const Recording& recording) {
  configure(recording.frequency_hz ? 1000000000ull / recording.frequency_hz : 1000000,
            recording.off_cpu);
  wake_threshold_ns_ = recording.wake_threshold_ns;
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
  }
}

void SessionModel::apply(MonotonicNs time, const LifecyclePayload& event) {
  std::visit([&](const auto& e) { on(time, e); }, event);
}

ProcessIndex SessionModel::start_process(MonotonicNs t, Pid pid, std::string name,
                                         std::string executable) {
  if (auto it = live_processes_.find(pid); it != live_processes_.end())
    end_process(t, it->second);  // the pid was reused without our seeing the exit
  ProcessIndex index{static_cast<uint32_t>(processes_.size())};
  Process p;
  p.pid = pid;
  p.name = std::move(name);
  p.executable = std::move(executable);
  p.start = t;
  processes_.push_back(std::move(p));
  live_processes_[pid] = index;
  return index;
}

ThreadIndex SessionModel::start_thread(MonotonicNs t, ProcessIndex process_index, Tid tid,
                                       std::string name, std::optional<CpuTimeNs> runtime) {
  if (auto it = live_threads_.find(tid); it != live_threads_.end()) {
    Thread& stale = thread(it->second);
    if (!stale.end) stale.end = t;
  }
  exited_threads_.erase(tid);
  ThreadIndex index{static_cast<uint32_t>(threads_.size())};
  Thread th;
  th.tid = tid;
  th.process = process_index;
  th.name = std::move(name);
  th.start = t;
  th.accounting = ThreadAccounting(t, runtime);
  threads_.push_back(std::move(th));
  process(process_index).threads.push_back(index);
  live_threads_[tid] = index;
  return index;
}

void SessionModel::end_process(MonotonicNs t, ProcessIndex index) {
  Process& p = process(index);
  if (!p.end) p.end = t;
  for (ThreadIndex ti : p.threads) {
    Thread& th = thread(ti);
    if (!th.end) th.end = t;
    auto it = live_threads_.find(th.tid);
    if (it != live_threads_.end() && it->second == ti) {
      live_threads_.erase(it);
      exited_threads_[th.tid] = ti;
    }
  }
  auto it = live_processes_.find(p.pid);
  if (it != live_processes_.end() && it->second == index) live_processes_.erase(it);
}

ProcessIndex SessionModel::live_process(MonotonicNs t, Pid pid) {
  if (auto it = live_processes_.find(pid); it != live_processes_.end()) return it->second;
  ProcessIndex index = start_process(t, pid, "pid " + std::to_string(pid.value), "");
  process(index).implicit = true;
  address_spaces_.try_emplace(pid);
  return index;
}

ThreadIndex SessionModel::live_thread(MonotonicNs t, Pid pid, Tid tid) {
  if (auto it = live_threads_.find(tid); it != live_threads_.end()) {
    if (thread(it->second).process == live_process(t, pid)) return it->second;
  } else if (auto gone = exited_threads_.find(tid); gone != exited_threads_.end()) {
    if (processes_[thread(gone->second).process.value].pid == pid) return gone->second;
  }
  ProcessIndex p = live_process(t, pid);
  return start_thread(t, p, tid, process(p).name, std::nullopt);
}

void SessionModel::on(MonotonicNs t, const ProcessStartEvent& e) {
  ProcessIndex p = start_process(t, e.pid, e.name, "");
  process(p).is_launcher = e.is_launcher;
  // Forked just now: all its runtime is ours to count.
  start_thread(t, p, Tid{e.pid.value}, e.name, CpuTimeNs{0});
  address_spaces_[e.pid] = AddressSpace{};
}

void SessionModel::on(MonotonicNs t, const ExistingProcessEvent& e) {
  auto known = live_processes_.find(e.pid);
  if (known != live_processes_.end() && process(known->second).implicit) {
    adopt_snapshot(t, known->second, e);
    return;
  }
  ProcessIndex p = start_process(t, e.pid, e.name, e.executable);
  process(p).euid = e.euid;
  address_spaces_[e.pid] = AddressSpace{};
  // Only CPU used from now on is counted.
  for (const ThreadState& ts : e.threads) start_thread(t, p, ts.tid, ts.comm, ts.cpu_time);
}

// A snapshot of a process that earlier events (a wakeup, a sample that came first) made up:
// it names that entry and its threads instead of starting another.
void SessionModel::adopt_snapshot(MonotonicNs t, ProcessIndex index,
                                  const ExistingProcessEvent& e) {
  Process& p = process(index);
  p.name = e.name;
  p.executable = e.executable;
  p.euid = e.euid;
  p.implicit = false;
  for (const ThreadState& ts : e.threads) {
    auto it = live_threads_.find(ts.tid);
    if (it != live_threads_.end() && thread(it->second).process == index)
      thread(it->second).name = ts.comm;
    else
      start_thread(t, index, ts.tid, ts.comm, ts.cpu_time);
  }
}

void SessionModel::on(MonotonicNs t, const ForkEvent& e) {
  ProcessIndex parent = live_process(t, e.parent_pid);
  if (e.child_pid == e.parent_pid) {
    start_thread(t, parent, e.child_tid, e.child_comm, CpuTimeNs{0});  // a new task: no runtime
    return;
  }
  std::string name = process(parent).name;
  std::string executable = process(parent).executable;
  const std::optional<uint32_t> euid = process(parent).euid;
  ProcessIndex child = start_process(t, e.child_pid, std::move(name), std::move(executable));
  process(child).euid = euid;
  start_thread(t, child, e.child_tid, e.child_comm, CpuTimeNs{0});
  // A forked child starts with a copy of its parent's address space.
  address_spaces_[e.child_pid] = address_spaces_[e.parent_pid];
}

void SessionModel::on(MonotonicNs t, const ExecEvent& e) {
  std::optional<CpuTimeNs> runtime;
  auto old_thread = live_threads_.find(e.old_tid);
  if (old_thread != live_threads_.end()) {
    const Thread& before = thread(old_thread->second);
    // The launcher's moments before the exec are left out of the profile, but the kernel
    // counts them as this task's: the command's entry takes its runtime from the fork on.
    runtime = processes_[before.process.value].is_launcher ? std::optional(CpuTimeNs{0})
                                                           : before.accounting.runtime();
  }
  if (auto it = live_processes_.find(e.pid); it != live_processes_.end())
    end_process(t, it->second);

  std::string name = e.filename.empty() ? e.comm : base_name(e.filename);
  ProcessIndex p = start_process(t, e.pid, std::move(name), e.filename);
  process(p).euid = e.euid;
  start_thread(t, p, e.tid, e.comm, runtime);  // the same task goes on running
  address_spaces_.try_emplace(e.pid);          // emptied by the reset that preceded the exec
}

// A runtime may give a thread its whole name (Ruby's Thread#name) where the kernel's comm
// holds its first 15 bytes: that comm leaves the whole name as it is.
static void rename_thread(Thread& th, const std::string& comm) {
  constexpr size_t kCommBytes = 15;
  if (comm.size() == kCommBytes && th.name.size() > kCommBytes && th.name.starts_with(comm)) return;
  th.name = comm;
}

void SessionModel::on(MonotonicNs t, const ExitEvent& e) {
  auto it = live_threads_.find(e.tid);
  if (it != live_threads_.end()) {
    Thread& th = thread(it->second);
    end_wait(th, t);
    th.accounting.exited(rules_, t, e.cpu_time, th.samples);
    th.end = t;
    th.final_cpu_time = e.cpu_time;
    if (!e.comm.empty()) rename_thread(th, e.comm);
    exited_threads_[e.tid] = it->second;
    live_threads_.erase(it);
  }
  if (e.group_dead) {
    if (auto p = live_processes_.find(e.pid); p != live_processes_.end()) {
      process(p->second).exit_code = e.exit_code;
      end_process(t, p->second);
    }
    if (auto space = address_spaces_.find(e.pid); space != address_spaces_.end()) {
      exited_address_spaces_.emplace_back(e.pid, std::move(space->second));
      if (exited_address_spaces_.size() > kExitedSpacesKept) exited_address_spaces_.pop_front();
      address_spaces_.erase(space);
    }
  }
}

const AddressSpace* SessionModel::address_space_of(Pid pid) const {
  if (auto it = address_spaces_.find(pid); it != address_spaces_.end()) return &it->second;
  for (auto it = exited_address_spaces_.rbegin(); it != exited_address_spaces_.rend(); ++it)
    if (it->first == pid) return &it->second;
  return nullptr;
}

void SessionModel::on(MonotonicNs, const CommEvent& e) {
  if (auto it = live_threads_.find(e.tid); it != live_threads_.end())
    rename_thread(thread(it->second), e.comm);
}

void SessionModel::on(MonotonicNs, const MmapEvent& e) {
  auto space = address_spaces_.find(e.pid);
  if (space == address_spaces_.end()) return;  // not a process we follow
  Mapping m;
  m.start = e.mapping.start;
  m.end = e.mapping.start + e.mapping.length;
  m.file_offset = e.mapping.file_offset;
  if (classify_mapping(e.mapping.path) == MappingKind::kAnonymousCode) {
    m.lib = anonymous_library(e.pid);
    m.file_offset = m.start;  // frames keep their absolute address
  } else {
    m.lib = intern_library(e.mapping);
  }
  space->second.add(m);
}

void SessionModel::on(MonotonicNs, const AddressSpaceResetEvent& e) {
  auto space = address_spaces_.find(e.pid);
  if (space != address_spaces_.end()) space->second = AddressSpace{};
}

LibId SessionModel::intern_library(const MappingInfo& mapping) {
  // The same path in two mount namespaces, or a file replaced under the same path, is a
  // different library. A file is known by its build-id where it has one: the kernel's MMAP2
  // records carry the build-id instead of device and inode, /proc snapshots the other way
  // round (MappedFiles adds the build-id), and both must name one library.
  const bool by_build_id = !mapping.build_id.empty();
  auto key = std::make_tuple(mapping.path, mapping.mount_namespace, mapping.build_id,
                             by_build_id ? 0 : mapping.dev_major,
                             by_build_id ? 0 : mapping.dev_minor, by_build_id ? 0 : mapping.inode);
  auto [it, inserted] =
      library_index_.try_emplace(key, LibId{static_cast<int32_t>(libraries_.size())});
  if (inserted) {
    libraries_.push_back(Library{.path = mapping.path,
                                 .dev_major = mapping.dev_major,
                                 .dev_minor = mapping.dev_minor,
                                 .inode = mapping.inode,
                                 .build_id = mapping.build_id,
                                 .mount_namespace = mapping.mount_namespace,
                                 .held_file = mapping.held_file});
  }
  return it->second;
}

LibId SessionModel::anonymous_library(Pid pid) {
  auto [it, inserted] =
      anonymous_libraries_.try_emplace(pid, LibId{static_cast<int32_t>(libraries_.size())});
  if (inserted) {
    Library lib;
    lib.path = "[anon]";
    lib.anonymous_memory_of = pid;
    libraries_.push_back(std::move(lib));
  }
  return it->second;
}

void SessionModel::add_sample(const SampleRecord& sample, const RawStackTree& raw_stacks) {
  Thread& th = thread(live_thread(sample.time, sample.pid, sample.tid));
  if (sample.kind == SampleKind::kWaking) return note_waking(th, sample, raw_stacks);
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
      break;
  }
}

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

namespace {

template <typename Key>
void subtract_shares(std::unordered_map<Key, WakerShare>& totals,
                     const std::unordered_map<Key, WakerShare>& part) {
  for (const auto& [key, share] : part) {
    auto it = totals.find(key);
    if (it == totals.end()) continue;
    it->second.waited_ns -= std::min(it->second.waited_ns, share.waited_ns);
    it->second.wakings -= std::min(it->second.wakings, share.wakings);
    if (!it->second.wakings) totals.erase(it);
  }
}

// The process's bucket of waker shares for the second of `t`, made if need be. Waits end in
// the order threads run again, not quite in the order they were woken: search from the end.
WakerSecond& waker_second(Process& p, MonotonicNs t) {
  const uint64_t second = t.value / 1000000000;
  auto it = p.waker_seconds.end();
  while (it != p.waker_seconds.begin() && std::prev(it)->second > second) --it;
  if (it != p.waker_seconds.begin() && std::prev(it)->second == second) return *std::prev(it);
  return *p.waker_seconds.insert(it, WakerSecond{second, {}, {}});
}

// The seconds of waker shares that ended by `t` leave the process's totals.
void forget_waker_seconds_before(Process& p, MonotonicNs t) {
  while (!p.waker_seconds.empty() && (p.waker_seconds.front().second + 1) * 1000000000 <= t.value) {
    subtract_shares(p.wakers, p.waker_seconds.front().wakers);
    subtract_shares(p.interrupt_wakers, p.waker_seconds.front().interrupt_wakers);
    p.waker_seconds.pop_front();
  }
}

// The frame of a raw address (a return address: the frame points into its call).
FrameKey frame_key(const AddressSpace* space, uint64_t address, bool return_address) {
  if (std::optional<RuntimeFrameId> python = runtime_frame_of(address))
    return FrameKey::runtime(*python);  // a line, not a return address
  if (address == kExecRawFrame) return FrameKey::exec();
  if (return_address && address > 0) address -= 1;
  if (is_kernel_address(address)) return FrameKey::kernel(address);
  if (const Mapping* m = space ? space->find(address) : nullptr)
    return FrameKey::native(m->lib, address - m->start + m->file_offset);
  return FrameKey::unmapped(address);
}

// The key of a raw stack of a process in resolved_ and resolved_callers_.
uint64_t resolved_key(Pid pid, RawStackId raw) {
  return static_cast<uint64_t>(static_cast<uint32_t>(pid.value)) << 32 | raw;
}

}  // namespace

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
    WakerSecond& bucket = waker_second(p, wait->woken);
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

StackId SessionModel::resolve(Pid pid, RawStackId raw, const RawStackTree& raw_stacks) {
  const AddressSpace* space = address_space_of(pid);
  const uint64_t version = space ? space->version() : 0;
  const uint64_t cache_key = resolved_key(pid, raw);
  if (auto it = resolved_.find(cache_key);
      it != resolved_.end() && it->second.address_space_version == version)
    return it->second.stack;
  const StackId resolved = resolve_uncached(pid, space, raw, raw_stacks);
  resolved_[cache_key] = ResolvedStack{version, resolved};
  return resolved;
}

StackId SessionModel::resolve_uncached(Pid pid, const AddressSpace* space, RawStackId raw,
                                       const RawStackTree& raw_stacks) {
  // The innermost user frame is the instruction the thread was at (sampled, or where it
  // entered the kernel), also below kernel frames: it is exact, as the leaf is. Those frames
  // are resolved each time; every frame above them is a return address, resolved once per
  // raw stack ending there.
  std::vector<uint64_t>& exact_part = scratch_exact_;  // leaf first
  exact_part.clear();
  RawStackId n = raw;
  for (; n != RawStackTree::kRoot && is_kernel_address(raw_stacks.node(n).key);
       n = raw_stacks.node(n).parent)
    exact_part.push_back(raw_stacks.node(n).key);
  const bool has_user_frame = n != RawStackTree::kRoot;
  if (has_user_frame) {
    exact_part.push_back(raw_stacks.node(n).key);
    n = raw_stacks.node(n).parent;
  }
  const uint64_t version = space ? space->version() : 0;
  std::vector<RawStackId>& callers = scratch_callers_;  // innermost first
  callers.clear();
  StackId node = ResolvedStackTree::kRoot;
  for (; n != RawStackTree::kRoot; n = raw_stacks.node(n).parent) {
    auto it = resolved_callers_.find(resolved_key(pid, n));
    if (it != resolved_callers_.end() && it->second.address_space_version == version) {
      node = it->second.stack;
      break;
    }
    callers.push_back(n);
  }
  for (size_t i = callers.size(); i-- > 0;) {
    node = stacks_.intern(node, frame_key(space, raw_stacks.node(callers[i]).key, true));
    resolved_callers_[resolved_key(pid, callers[i])] = ResolvedStack{version, node};
  }
  for (size_t i = exact_part.size(); i-- > 0;) {
    const bool exact = i == 0 || (has_user_frame && i == exact_part.size() - 1);
    node = stacks_.intern(node, frame_key(space, exact_part[i], !exact));
  }
  return node;
}

void SessionModel::drop_samples_before(MonotonicNs t) {
  for (Thread& th : threads_) {
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
    std::erase_if(th.woken_waits, [&](const WokenWait& w) { return w.woken < t; });
  }
  for (Process& p : processes_) forget_waker_seconds_before(p, t);
}

void SessionModel::clear_waker_totals() {
  for (Process& p : processes_) {
    p.wakers.clear();
    p.interrupt_wakers.clear();
    p.waker_seconds.clear();
  }
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

template <typename Key, typename Index>
void renumber_map(std::unordered_map<Key, Index>& map,
                  const std::vector<std::optional<Index>>& moved) {
  std::erase_if(map, [&](const auto& entry) { return !moved[entry.second.value]; });
  for (auto& [key, index] : map) index = *moved[index.value];
}

}  // namespace

void SessionModel::forget_ended_before(MonotonicNs t) {
  auto thread_gone = [&](size_t i) {
    const Thread& th = threads_[i];
    return th.end && *th.end < t && th.samples.empty() && th.woken_waits.empty();
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
    th.accounting.move_stacks(move);
    th.waits.move_stacks(move);
    for (WokenWait& w : th.woken_waits)
      if (w.cause) w.cause = move(*w.cause);
  }
  auto move_keys = [&](std::unordered_map<StackId, WakerShare>& shares) {
    std::unordered_map<StackId, WakerShare> by_stack;
    for (const auto& [stack, share] : shares) {
      WakerShare& moved_share = by_stack[move(stack)];
      moved_share.waited_ns += share.waited_ns;
      moved_share.wakings += share.wakings;
    }
    shares = std::move(by_stack);
  };
  for (Process& p : processes_) {
    move_keys(p.interrupt_wakers);
    for (WakerSecond& second : p.waker_seconds) move_keys(second.interrupt_wakers);
  }
  stacks_ = std::move(stacks);
  compact_raw_stacks(recording, other_raw_stacks);
}

void SessionModel::compact_raw_stacks(
    Recording& recording, const std::function<void(const RawStackMove&)>& other_raw_stacks) {
  resolved_.clear();  // keyed by raw stacks (and maybe pointing into an old resolved tree)
  resolved_callers_.clear();
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
