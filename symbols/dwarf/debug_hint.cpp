#include "symbols/dwarf/debug_hint.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>

#include "symbols/util/unique_handle.h"

extern char** environ;

namespace bpfprof {
namespace {

// The standard output of `dpkg-query -S path` (no shell: the path is passed as is).
std::string dpkg_query_search(const std::string& path) {
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) return {};
  UniqueFd read_end(pipe_fds[0]);
  UniqueFd write_end(pipe_fds[1]);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, write_end.get(), STDOUT_FILENO);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
  std::array<char*, 4> argv{const_cast<char*>("dpkg-query"), const_cast<char*>("-S"),
                            const_cast<char*>(path.c_str()), nullptr};
  pid_t pid = 0;
  const int spawned = posix_spawnp(&pid, "dpkg-query", &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  write_end.reset();
  if (spawned != 0) return {};
  std::string output;
  char buffer[512];
  ssize_t got = 0;
  while ((got = read(read_end.get(), buffer, sizeof buffer)) > 0)
    output.append(buffer, static_cast<size_t>(got));
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? output : std::string();
}

}  // namespace

std::string debian_package_of(const std::string& path) {
  std::string output = dpkg_query_search(path);
  if (output.empty() && path.starts_with("/usr/")) output = dpkg_query_search(path.substr(4));
  // "liblzma5:amd64: /lib/x86_64-linux-gnu/liblzma.so.5.4.1"
  const size_t end = output.find_first_of(":,\n");
  return end == std::string::npos ? std::string() : output.substr(0, end);
}

std::string debug_info_hint(const std::vector<std::string>& library_paths) {
  if (library_paths.empty()) return {};
  std::string packages;
  for (const std::string& path : library_paths) {
    const std::string package = debian_package_of(path);
    if (package.empty() || packages.find(package + "-dbgsym") != std::string::npos) continue;
    packages += (packages.empty() ? "" : " ") + package + "-dbgsym";
  }
  const std::string debuginfod = "set DEBUGINFOD_URLS (e.g. https://debuginfod.debian.net)";
  if (packages.empty()) return "for names there, " + debuginfod;
  return "for names there, install " + packages + " (Debian's debian-debug archive) or " +
         debuginfod;
}

}  // namespace bpfprof
