// SessionModel's processes and threads over time: forks, execs, exits and renames, the
// snapshots of processes already running, and the mappings they report.
#include "userspace/model/session_model.h"

#include <utility>

#include "symbols/util/text.h"

namespace bpfprof {

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
  spaces_.follow(pid);
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
  spaces_.start(e.pid);
}

void SessionModel::on(MonotonicNs t, const ExistingProcessEvent& e) {
  auto known = live_processes_.find(e.pid);
  if (known != live_processes_.end() && process(known->second).implicit) {
    adopt_snapshot(t, known->second, e);
    return;
  }
  ProcessIndex p = start_process(t, e.pid, e.name, e.executable);
  process(p).euid = e.euid;
  spaces_.start(e.pid);
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
  ProcessContext context = process(parent).context;
  ProcessIndex child = start_process(t, e.child_pid, std::move(name), std::move(executable));
  process(child).euid = euid;
  process(child).context = std::move(context);
  start_thread(t, child, e.child_tid, e.child_comm, CpuTimeNs{0});
  // A forked child starts with a copy of its parent's address space.
  spaces_.fork(e.parent_pid, e.child_pid);
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
  // The context read after the exec follows (ProcessContextEvent); until then, and if the
  // process is gone before it is read, the one before the exec.
  ProcessContext context;
  if (auto it = live_processes_.find(e.pid); it != live_processes_.end()) {
    context = process(it->second).context;
    end_process(t, it->second);
  }

  std::string name = e.filename.empty() ? e.comm : base_name(e.filename);
  ProcessIndex p = start_process(t, e.pid, std::move(name), e.filename);
  process(p).euid = e.euid;
  process(p).context = std::move(context);
  start_thread(t, p, e.tid, e.comm, runtime);  // the same task goes on running
  spaces_.follow(e.pid);                       // emptied by the reset that preceded the exec
}

void SessionModel::on(MonotonicNs, const ProcessContextEvent& e) {
  // Read after the event that made the process known: one that ended meanwhile keeps the
  // context it inherited.
  if (auto it = live_processes_.find(e.pid); it != live_processes_.end())
    process(it->second).context = e.context;
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
    spaces_.exited(e.pid);
  }
}

void SessionModel::on(MonotonicNs, const CommEvent& e) {
  if (auto it = live_threads_.find(e.tid); it != live_threads_.end())
    rename_thread(thread(it->second), e.comm);
}

void SessionModel::on(MonotonicNs, const MmapEvent& e) { spaces_.map(e.pid, e.mapping); }

void SessionModel::on(MonotonicNs, const AddressSpaceResetEvent& e) { spaces_.reset(e.pid); }

}  // namespace bpfprof
