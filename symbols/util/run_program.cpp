#include "symbols/util/run_program.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

#include "symbols/util/unique_handle.h"

extern char** environ;

namespace bpfprof {
namespace {

std::optional<pid_t> spawn_with_stdout(const std::vector<std::string>& argv, int stdout_fd) {
  std::vector<char*> args;
  for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, stdout_fd, STDOUT_FILENO);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
  pid_t pid = 0;
  const int spawned = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  return spawned == 0 ? std::optional(pid) : std::nullopt;
}

// Reads `fd` to its end; false if `deadline` passed first.
bool read_until_end(int fd, std::chrono::steady_clock::time_point deadline, std::string& out) {
  char buffer[4096];
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd ready{fd, POLLIN, 0};
    const int polled = poll(&ready, 1, static_cast<int>(left.count()));
    if (polled < 0 && errno == EINTR) continue;
    if (polled <= 0) return false;
    const ssize_t got = read(fd, buffer, sizeof buffer);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return got == 0;
    out.append(buffer, static_cast<size_t>(got));
  }
}

}  // namespace

std::optional<std::string> program_output(const std::vector<std::string>& argv,
                                          std::chrono::milliseconds timeout, ExitStatus status) {
  if (argv.empty()) return std::nullopt;
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) return std::nullopt;
  UniqueFd read_end(pipe_fds[0]);
  UniqueFd write_end(pipe_fds[1]);
  const std::optional<pid_t> pid = spawn_with_stdout(argv, write_end.get());
  write_end.reset();
  if (!pid) return std::nullopt;
  std::string output;
  const bool ended =
      read_until_end(read_end.get(), std::chrono::steady_clock::now() + timeout, output);
  if (!ended) kill(*pid, SIGKILL);
  int wait_status = 0;
  while (waitpid(*pid, &wait_status, 0) < 0 && errno == EINTR) {
  }
  if (!ended || !WIFEXITED(wait_status)) return std::nullopt;
  if (status == ExitStatus::kMustBeZero && WEXITSTATUS(wait_status) != 0) return std::nullopt;
  return output;
}

}  // namespace bpfprof
