#include "userspace/session/record_targets.h"

#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>

#include "symbols/util/read_file.h"
#include "symbols/util/text.h"
#include "userspace/model/clocks.h"
#include "userspace/session/cgroup_targets.h"
#include "userspace/session/proc_snapshot.h"
#include "userspace/session/program_files.h"

namespace bpfprof {

namespace {

// A running process we attached to; readable once it has exited (immune to pid reuse).
UniqueFd open_pidfd(Pid pid) {
  return UniqueFd(static_cast<int>(syscall(SYS_pidfd_open, pid.value, 0)));
}

// The pidfds of the processes still running (a pidfd is readable once its process exited).
std::vector<int> running(const std::vector<UniqueFd>& pidfds) {
  std::vector<pollfd> fds;
  for (const UniqueFd& fd : pidfds) fds.push_back(pollfd{fd.get(), POLLIN, 0});
  const bool polled = poll(fds.data(), fds.size(), 0) >= 0;
  std::vector<int> out;
  for (const pollfd& p : fds)
    if (!polled || !(p.revents & (POLLIN | POLLHUP))) out.push_back(p.fd);
  return out;
}

// The process (thread group) a task id belongs to, from /proc/ID/status.
std::optional<int> thread_group_of(int id) {
  std::optional<std::string> status = read_entire_file("/proc/" + std::to_string(id) + "/status");
  if (!status) return std::nullopt;
  const size_t at = status->find("\nTgid:");
  if (at == std::string::npos) return std::nullopt;
  return atoi(status->c_str() + at + 6);
}

}  // namespace

std::optional<std::string> check_attach_targets(const std::vector<int>& pids) {
  for (int pid : pids) {
    if (pid <= 0) return "invalid pid " + std::to_string(pid);
    if (kill(pid, 0) != 0 && errno == ESRCH) return "no process with pid " + std::to_string(pid);
    if (access(("/proc/" + std::to_string(pid) + "/maps").c_str(), R_OK) != 0)
      return "cannot read /proc/" + std::to_string(pid) + ": " + strerror(errno);
    // A thread's id passes the checks above (kill and /proc accept it) but cannot be
    // followed as a process.
    if (std::optional<int> tgid = thread_group_of(pid); tgid && *tgid != pid)
      return std::to_string(pid) + " is a thread of process " + std::to_string(*tgid) +
             "; give the process id (-p " + std::to_string(*tgid) + ")";
  }
  return std::nullopt;
}

void RecordTargets::fork_command(const std::optional<RunAsUser>& invoking_user) {
  if (!options_.command.empty())
    command_.emplace(options_.command, options_.run_as_root ? std::nullopt : invoking_user);
}

void RecordTargets::start(BpfPrograms& bpf, KernelUnwindTables* kernel_unwind,
                          Recording& recording) {
  if (command_)
    launch_command(bpf, kernel_unwind, recording);
  else
    attach(bpf, kernel_unwind, recording);
}

void RecordTargets::launch_command(BpfPrograms& bpf, KernelUnwindTables* kernel_unwind,
                                   Recording& recording) {
  if (kernel_unwind) preload_command_tables(*kernel_unwind);
  bpf.track_process(command_->pid(), BpfPrograms::Tracked::kLaunchedBeforeExec);
  command_pidfd_ = open_pidfd(command_->pid());
  recording.events.push_back(LifecycleEvent{
      recording.start_time,
      ProcessStartEvent{command_->pid(), base_name(options_.command[0]), /*is_launcher=*/true}});
  if (std::optional<std::string> error = command_->release())
    throw RecordFailure(127, "cannot run " + options_.command[0] + ": " + *error);
}

namespace {

// Tables of `paths` built (or read from the cache) and in the kernel before the targets are
// sampled, waiting at most half a second: a table still being built is loaded as usual when
// it is done.
void load_tables_first(KernelUnwindTables& kernel_unwind, const std::vector<std::string>& paths) {
  constexpr std::chrono::milliseconds kLongestWait{500};
  kernel_unwind.preload(paths);
  kernel_unwind.wait_for_tables(kLongestWait);
  kernel_unwind.flush(monotonic_now());
}

}  // namespace

// The tables of the files the command maps as it starts (program_files.h), loaded before it
// runs: without them its first samples would fall back to stack copies.
void RecordTargets::preload_command_tables(KernelUnwindTables& kernel_unwind) const {
  const std::optional<std::string> executable = find_executable(options_.command[0]);
  if (executable) load_tables_first(kernel_unwind, files_mapped_at_start(*executable));
}

// The tables of the files -p's processes map (-a: every process's), loaded before they are
// tracked, as a command's are: the kernel walk finds them from the VMA before the process's own
// entry reaches the kernel (a stripped Go binary, which has no CFI, could not be unwound from a
// stack copy). Cached tables load within the wait; the others are built as usual.
void RecordTargets::preload_attach_tables(KernelUnwindTables& kernel_unwind,
                                          const std::vector<Pid>& targets) const {
  std::set<std::string> paths;
  for (Pid pid : targets)
    if (std::optional<ProcessSnapshot> snapshot = snapshot_process(pid))
      for (const MapEntry& mapping : snapshot->executable_mappings)
        if (mapping.path.starts_with('/')) paths.insert(mapping.path);
  load_tables_first(kernel_unwind, {paths.begin(), paths.end()});
}

// The processes running now that -p, -a or --cgroup records. --cgroup's subtrees go to the
// kernel first: a process that execs in one from now on is tracked there.
std::vector<Pid> RecordTargets::attach_targets(BpfPrograms& bpf) const {
  if (options_.system_wide) return list_processes();
  if (!options_.cgroup_paths.empty()) {
    std::vector<CgroupTarget> cgroups;
    std::vector<bpfprof_cgroup_filter> filters;
    for (const std::string& path : options_.cgroup_paths) {
      cgroups.push_back(resolve_cgroup(path));
      filters.push_back(cgroups.back().filter);
    }
    bpf.set_cgroup_filters(filters);
    return processes_in(cgroups);
  }
  std::vector<Pid> targets;
  for (int pid : options_.attach_pids) targets.push_back(Pid{pid});
  return targets;
}

// -p, -a and --cgroup. Track first, then read /proc: a thread or child created in between is
// seen by both, never by neither. -a and --cgroup run until their duration or Ctrl-C; -p
// until its processes are gone.
void RecordTargets::attach(BpfPrograms& bpf, KernelUnwindTables* kernel_unwind,
                           Recording& recording) {
  const std::vector<Pid> targets = attach_targets(bpf);
  if (kernel_unwind) preload_attach_tables(*kernel_unwind, targets);
  const bool by_pid = !options_.attach_pids.empty();
  for (Pid pid : targets) {
    if (options_.system_wide) continue;
    bpf.track_process(pid);
    if (!by_pid) continue;
    // Without it the recording could not tell when its targets are gone, and would never
    // end by itself.
    UniqueFd pidfd = open_pidfd(pid);
    if (!pidfd.valid())
      throw RecordFailure(
          2, "cannot follow pid " + std::to_string(pid.value) + ": " +
                 (errno == ESRCH ? "it exited before the recording started" : strerror(errno)));
    pidfds_.push_back(std::move(pidfd));
  }
  for (Pid pid : targets) {
    std::string error;
    std::optional<ProcessSnapshot> snapshot = snapshot_process(pid, &error);
    if (snapshot)
      append_snapshot_events(recording.start_time, std::move(*snapshot), recording.events);
    else if (by_pid)
      throw RecordFailure(2, error);
  }
  if (by_pid) attach_descendants(bpf, targets, recording);
}

// -p of a server's master records its workers, as `-- CMD` records a command's tree: those
// running now are read from /proc (tracked first), those forked later are followed as any
// child of a tracked process. One that exits meanwhile is left out.
void RecordTargets::attach_descendants(BpfPrograms& bpf, const std::vector<Pid>& targets,
                                       Recording& recording) {
  const std::vector<Pid> descendants = descendants_of(targets);
  for (Pid pid : descendants) bpf.track_process(pid);
  for (Pid pid : descendants)
    if (std::optional<ProcessSnapshot> snapshot = snapshot_process(pid))
      append_snapshot_events(recording.start_time, std::move(*snapshot), recording.events);
}

std::vector<int> RecordTargets::running_fds() const {
  std::vector<int> fds = running(pidfds_);
  if (command_pidfd_.valid()) fds.push_back(command_pidfd_.get());
  return fds;
}

bool RecordTargets::ended() {
  if (command_ && command_->poll_exited()) {
    command_exited_ = true;
    return true;
  }
  return !pidfds_.empty() && running(pidfds_).empty();
}

void RecordTargets::pass_on(int signal) const {
  if (command_) command_->send_signal(signal);
}

}  // namespace bpfprof
