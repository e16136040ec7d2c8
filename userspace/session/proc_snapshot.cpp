#include "userspace/session/proc_snapshot.h"

#include <dirent.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <unordered_map>
#include <unordered_set>

#include "symbols/util/read_file.h"
#include "symbols/util/text.h"
#include "symbols/util/untrusted_file.h"

namespace bpfprof {

namespace {

std::string trim_newline(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\0')) s.pop_back();
  return s;
}

std::vector<int> numeric_entries(const std::string& dir) {
  std::vector<int> ids;
  std::unique_ptr<DIR, int (*)(DIR*)> d(opendir(dir.c_str()), closedir);
  if (!d) return ids;
  while (dirent* e = readdir(d.get())) {
    char* end = nullptr;
    long v = strtol(e->d_name, &end, 10);
    if (end != e->d_name && *end == '\0' && v > 0) ids.push_back(static_cast<int>(v));
  }
  return ids;
}

}  // namespace

std::vector<Pid> list_processes() {
  std::vector<Pid> pids;
  for (int id : numeric_entries("/proc")) pids.push_back(Pid{id});
  return pids;
}

std::optional<Pid> parent_in_stat(std::string_view stat) {
  const size_t comm_end = stat.rfind(')');
  if (comm_end == std::string_view::npos || stat.size() < comm_end + 4) return std::nullopt;
  std::string_view rest = stat.substr(comm_end + 2);  // ") S 123 ..."
  const size_t state_end = rest.find(' ');
  if (state_end == std::string_view::npos) return std::nullopt;
  rest.remove_prefix(state_end + 1);
  int parent = 0;
  const auto [end, error] = std::from_chars(rest.data(), rest.data() + rest.size(), parent);
  if (error != std::errc() || end == rest.data() || parent < 0) return std::nullopt;
  return Pid{parent};
}

std::vector<Pid> descendants_of(const std::vector<Pid>& roots) {
  std::unordered_map<int, std::vector<Pid>> children;
  for (int id : numeric_entries("/proc")) {
    const std::optional<std::string> stat =
        read_entire_file("/proc/" + std::to_string(id) + "/stat");
    if (!stat) continue;
    if (const std::optional<Pid> parent = parent_in_stat(*stat))
      children[parent->value].push_back(Pid{id});
  }
  std::vector<Pid> found;
  std::unordered_set<int> seen;
  for (Pid root : roots) seen.insert(root.value);
  std::vector<Pid> todo(roots);
  while (!todo.empty()) {
    const Pid parent = todo.back();
    todo.pop_back();
    for (Pid child : children[parent.value]) {
      if (!seen.insert(child.value).second) continue;
      found.push_back(child);
      todo.push_back(child);
    }
  }
  return found;
}

std::optional<ProcessSnapshot> snapshot_process(Pid pid, std::string* error) {
  const std::string dir = "/proc/" + std::to_string(pid.value);
  ProcessSnapshot s;
  s.pid = pid;
  std::optional<std::string> comm = read_entire_file(dir + "/comm");
  if (!comm) {
    // ENOENT: gone (or never there); anything else is said as it is (seen once, unexplained,
    // for a process that had just printed to its parent).
    const int read_error = errno;
    if (error)
      *error = read_error == ENOENT || read_error == ESRCH
                   ? "no process with pid " + std::to_string(pid.value)
                   : "cannot read " + dir + "/comm: " + std::strerror(read_error);
    return std::nullopt;
  }
  s.comm = trim_newline(*comm);
  s.euid = process_effective_uid(pid.value);
  char exe[4096];
  ssize_t n = readlink((dir + "/exe").c_str(), exe, sizeof(exe) - 1);
  if (n > 0) s.executable.assign(exe, static_cast<size_t>(n));

  for (int tid : numeric_entries(dir + "/task")) {
    const std::string task = dir + "/task/" + std::to_string(tid);
    std::optional<std::string> thread_comm = read_entire_file(task + "/comm");
    if (!thread_comm) continue;  // exited meanwhile
    ThreadState t{Tid{tid}, trim_newline(*thread_comm), CpuTimeNs{0}};
    // schedstat's first field is the thread's sum_exec_runtime, the clock BPF samples read.
    if (std::optional<std::string> schedstat = read_entire_file(task + "/schedstat"))
      t.cpu_time = CpuTimeNs{strtoull(schedstat->c_str(), nullptr, 10)};
    s.threads.push_back(std::move(t));
  }
  if (std::optional<std::vector<MapEntry>> maps = read_proc_maps(pid.value)) {
    for (MapEntry& m : *maps)
      if (m.executable) s.executable_mappings.push_back(std::move(m));
  }
  return s;
}

std::optional<uint64_t> resident_bytes_now(Pid pid) {
  const std::optional<std::string> statm =
      read_entire_file("/proc/" + std::to_string(pid.value) + "/statm");
  if (!statm) return std::nullopt;
  unsigned long long size = 0, resident = 0;
  if (sscanf(statm->c_str(), "%llu %llu", &size, &resident) != 2) return std::nullopt;
  return static_cast<uint64_t>(resident) * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
}

void append_snapshot_events(MonotonicNs time, ProcessSnapshot snapshot,
                            std::vector<LifecycleEvent>& out) {
  std::string name = snapshot.executable.empty() ? snapshot.comm : base_name(snapshot.executable);
  if (name.size() > 10 && name.ends_with(" (deleted)")) name.resize(name.size() - 10);
  out.push_back(LifecycleEvent{
      time, ExistingProcessEvent{snapshot.pid, std::move(name), std::move(snapshot.executable),
                                 std::move(snapshot.threads), snapshot.euid}});
  for (MapEntry& m : snapshot.executable_mappings) {
    MmapEvent e;
    e.pid = snapshot.pid;
    e.tid = Tid{snapshot.pid.value};
    e.mapping = MappingInfo{m.start,     m.end - m.start, m.file_offset,     m.dev_major,
                            m.dev_minor, m.inode,         std::move(m.path), {}};
    out.push_back(LifecycleEvent{time, std::move(e)});
  }
}

}  // namespace bpfprof
