// What `record` follows, in one of four ways: the command it launches (-- CMD), running
// processes (-p), every process (-a), or those of cgroups (--cgroup); whether they are gone yet,
// and which signals reach the command.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "symbols/util/unique_handle.h"
#include "userspace/capture/bpf_programs.h"
#include "userspace/capture/kernel_unwind.h"
#include "userspace/model/recording.h"
#include "userspace/session/launcher.h"
#include "userspace/session/recorder.h"

namespace bpfprof {

// -p's pids before anything starts: each must be a running process (not a thread) whose
// mappings bpfprof can read; the problem in one line, else nullopt.
std::optional<std::string> check_attach_targets(const std::vector<int>& pids);

class RecordTargets {
 public:
  explicit RecordTargets(const RecordOptions& options) : options_(options) {}

  // -- CMD: forks the command's process, which waits before its exec until start(). It runs
  // as `invoking_user` unless --run-as-root. Throws std::runtime_error.
  void fork_command(const std::optional<RunAsUser>& invoking_user);
  // Tracks the targets in the kernel and adds their start (the command's) or their state from
  // /proc (-p, -a) to `recording`'s events; the command then runs. `kernel_unwind`, when
  // given, gets the tables of the files the command maps as it starts. Throws RecordFailure
  // or std::runtime_error.
  void start(BpfPrograms& bpf, KernelUnwindTables* kernel_unwind, Recording& recording);

  bool launched() const { return command_.has_value(); }
  // Readable once a target has exited: ends a wait for the rings at once.
  std::vector<int> running_fds() const;
  // True once the command has exited, or every -p process has.
  bool ended();
  bool command_exited() const { return command_exited_; }
  // The command's exit status as a shell reports it, once it has exited.
  int command_status() const { return command_->exit_status(); }
  // Passes a signal sent to bpfprof alone on to the command.
  void pass_on(int signal) const;

 private:
  void launch_command(BpfPrograms& bpf, KernelUnwindTables* kernel_unwind, Recording& recording);
  void preload_command_tables(KernelUnwindTables& kernel_unwind) const;
  void preload_attach_tables(KernelUnwindTables& kernel_unwind,
                             const std::vector<Pid>& targets) const;
  std::vector<Pid> attach_targets(BpfPrograms& bpf) const;
  void attach(BpfPrograms& bpf, KernelUnwindTables* kernel_unwind, Recording& recording);
  void attach_descendants(BpfPrograms& bpf, const std::vector<Pid>& targets, Recording& recording);

  const RecordOptions& options_;
  std::optional<LaunchedCommand> command_;
  UniqueFd command_pidfd_;        // its exit ends a wait for the rings at once
  std::vector<UniqueFd> pidfds_;  // -p: one per process; readable once it has exited
  bool command_exited_ = false;
};

}  // namespace bpfprof
