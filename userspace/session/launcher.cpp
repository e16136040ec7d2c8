#include "userspace/session/launcher.h"

#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

namespace bpfprof {

namespace {

bool is_executable_file(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(path.c_str(), X_OK) == 0;
}

}  // namespace

std::optional<std::string> find_executable(const std::string& command) {
  if (command.empty()) return std::nullopt;
  if (command.find('/') != std::string::npos)
    return is_executable_file(command) ? std::optional(command) : std::nullopt;
  const char* path_env = getenv("PATH");
  std::string path = path_env ? path_env : "/usr/local/bin:/usr/bin:/bin";
  size_t pos = 0;
  while (pos <= path.size()) {
    size_t end = path.find(':', pos);
    if (end == std::string::npos) end = path.size();
    std::string dir = path.substr(pos, end - pos);
    std::string candidate = (dir.empty() ? "." : dir) + "/" + command;
    if (is_executable_file(candidate)) return candidate;
    pos = end + 1;
  }
  return std::nullopt;
}

std::optional<RunAsUser> sudo_invoking_user() {
  const char* uid_text = getenv("SUDO_UID");
  if (geteuid() != 0 || !uid_text || !*uid_text) return std::nullopt;
  char* end = nullptr;
  const unsigned long uid = strtoul(uid_text, &end, 10);
  if (*end != '\0') throw std::runtime_error(std::string("SUDO_UID is not a user id: ") + uid_text);
  if (uid == 0) return std::nullopt;  // sudo from root: nothing to drop
  const passwd* user = getpwuid(static_cast<uid_t>(uid));
  if (!user)
    throw std::runtime_error("SUDO_UID " + std::to_string(uid) + " is no user of this system");
  RunAsUser run_as;
  run_as.uid = user->pw_uid;
  run_as.gid = user->pw_gid;
  if (const char* gid_text = getenv("SUDO_GID"); gid_text && *gid_text) {
    // Garbage must not become gid 0.
    const unsigned long gid = strtoul(gid_text, &end, 10);
    if (*end != '\0' || gid_text[0] < '0' || gid_text[0] > '9' || gid > UINT32_MAX - 1)
      throw std::runtime_error(std::string("SUDO_GID is not a group id: ") + gid_text);
    run_as.gid = static_cast<gid_t>(gid);
  }
  run_as.name = user->pw_name;
  run_as.home = user->pw_dir;
  int count = 64;
  run_as.groups.resize(static_cast<size_t>(count));
  if (getgrouplist(user->pw_name, run_as.gid, run_as.groups.data(), &count) < 0) {
    run_as.groups.resize(static_cast<size_t>(count));
    getgrouplist(user->pw_name, run_as.gid, run_as.groups.data(), &count);
  }
  run_as.groups.resize(static_cast<size_t>(std::max(count, 0)));
  return run_as;
}

int become_user(const RunAsUser& user) {
  errno = 0;
  if (setgroups(user.groups.size(), user.groups.data()) != 0 || setgid(user.gid) != 0 ||
      setuid(user.uid) != 0 || getuid() != user.uid || geteuid() != user.uid)
    return errno ? errno : EPERM;
  return 0;
}

LaunchedCommand::LaunchedCommand(const std::vector<std::string>& argv,
                                 const std::optional<RunAsUser>& run_as) {
  if (argv.empty()) throw std::runtime_error("no command given");
  int go[2], exec_error[2];
  if (pipe2(go, O_CLOEXEC) != 0 || pipe2(exec_error, O_CLOEXEC) != 0)
    throw std::runtime_error(std::string("cannot create a pipe: ") + strerror(errno));
  UniqueFd go_read(go[0]), exec_error_write(exec_error[1]);
  go_write_ = UniqueFd(go[1]);
  exec_error_read_ = UniqueFd(exec_error[0]);

  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  // The child's environment, prepared here: only async-signal-safe calls after fork.
  std::vector<std::string> environment;
  for (char** e = environ; *e; ++e) {
    std::string_view entry(*e);
    if (run_as &&
        (entry.starts_with("HOME=") || entry.starts_with("USER=") || entry.starts_with("LOGNAME=")))
      continue;
    environment.emplace_back(entry);
  }
  if (run_as) {
    environment.push_back("HOME=" + run_as->home);
    environment.push_back("USER=" + run_as->name);
    environment.push_back("LOGNAME=" + run_as->name);
  }
  std::vector<char*> envp;
  for (std::string& e : environment) envp.push_back(e.data());
  envp.push_back(nullptr);

  pid_ = fork();
  if (pid_ < 0) throw std::runtime_error(std::string("cannot fork: ") + strerror(errno));
  if (pid_ == 0) {
    // Child: only async-signal-safe calls from here on.
    go_write_.reset();
    exec_error_read_.reset();
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    signal(SIGHUP, SIG_DFL);
    signal(SIGQUIT, SIG_DFL);
    signal(SIGPIPE, SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    char byte;
    ssize_t n;
    do n = read(go_read.get(), &byte, 1);
    while (n < 0 && errno == EINTR);
    if (n != 1) _exit(127);  // the profiler went away before starting us
    int err = 0;
    if (run_as) err = become_user(*run_as);
    if (!err) {
      execvpe(args[0], args.data(), envp.data());
      err = errno;
    }
    ssize_t ignored = write(exec_error_write.get(), &err, sizeof(err));
    (void)ignored;
    _exit(127);
  }
}

LaunchedCommand::~LaunchedCommand() {
  if (pid_ > 0 && !reaped_) {
    if (!released_) kill(pid_, SIGKILL);
    // A released command keeps running (e.g. after --duration); an unreleased one is reaped.
    if (!released_) waitpid(pid_, nullptr, 0);
  }
}

std::optional<std::string> LaunchedCommand::release() {
  released_ = true;
  char byte = 1;
  if (write(go_write_.get(), &byte, 1) != 1)
    return std::string("cannot start the command: ") + strerror(errno);
  go_write_.reset();
  int err = 0;
  ssize_t n;
  do n = read(exec_error_read_.get(), &err, sizeof(err));
  while (n < 0 && errno == EINTR);
  exec_error_read_.reset();
  if (n == static_cast<ssize_t>(sizeof(err))) return std::string(strerror(err));
  return std::nullopt;
}

bool LaunchedCommand::poll_exited() {
  if (reaped_) return true;
  int status = 0;
  pid_t r = waitpid(pid_, &status, WNOHANG);
  if (r != pid_) return false;
  reaped_ = true;
  exit_status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return true;
}

void LaunchedCommand::send_signal(int signal) const {
  if (pid_ > 0 && !reaped_) kill(pid_, signal);
}

}  // namespace bpfprof
