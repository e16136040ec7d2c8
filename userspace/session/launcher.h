// Launches the profiled command: the child is forked, waits until the profiler is attached
// and its pid is tracked, then execs the command with the caller's environment and cwd.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "symbols/util/unique_handle.h"
#include "userspace/model/ids.h"

namespace bpfprof {

// Finds `command` like execvp would; nullopt when it cannot be run.
std::optional<std::string> find_executable(const std::string& command);

// The user a command is run as instead of root: who started bpfprof through sudo.
struct RunAsUser {
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;  // supplementary groups, from the group database
  std::string name;
  std::string home;
};

// The invoking user when bpfprof runs as root through sudo (SUDO_UID, SUDO_GID, SUDO_USER),
// else nullopt. Throws std::runtime_error when sudo's variables name no valid user.
std::optional<RunAsUser> sudo_invoking_user();

// In a child process before exec: becomes `user` (supplementary groups, gid, uid), checked.
// Returns 0, or the errno of what failed. Async-signal-safe.
int become_user(const RunAsUser& user);

class LaunchedCommand {
 public:
  // Forks the child, which blocks before exec; it runs as `run_as` when given (groups, gid,
  // uid, and HOME/USER/LOGNAME from the user database). Throws std::runtime_error.
  explicit LaunchedCommand(const std::vector<std::string>& argv,
                           const std::optional<RunAsUser>& run_as = std::nullopt);
  ~LaunchedCommand();  // a child never released or reaped is killed and reaped
  LaunchedCommand(const LaunchedCommand&) = delete;
  LaunchedCommand& operator=(const LaunchedCommand&) = delete;

  Pid pid() const { return Pid{pid_}; }
  // Lets the child exec. Returns an error message if the exec failed.
  std::optional<std::string> release();
  // Non-blocking: true once the child has exited (its status is then available).
  bool poll_exited();
  void send_signal(int signal) const;
  // The exit status as a shell reports it: the code, or 128 + signal number.
  int exit_status() const { return exit_status_; }

 private:
  pid_t pid_ = -1;
  UniqueFd go_write_;
  UniqueFd exec_error_read_;
  bool released_ = false;
  bool reaped_ = false;
  int exit_status_ = 0;
};

}  // namespace bpfprof
