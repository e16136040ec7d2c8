#include "userspace/foreign_files.h"

#include <fcntl.h>
#include <sys/stat.h>

namespace bpfprof {

uint64_t mount_namespace_id(const std::string& proc_pid_dir) {
  struct stat st;
  if (stat((proc_pid_dir + "/ns/mnt").c_str(), &st) != 0) return 0;
  return static_cast<uint64_t>(st.st_ino);
}

ForeignFiles::ForeignFiles() : own_namespace_(mount_namespace_id("/proc/self")) {}

uint64_t ForeignFiles::namespace_of(Pid pid) {
  auto [it, inserted] = namespace_by_pid_.try_emplace(pid, 0);
  if (inserted) it->second = mount_namespace_id("/proc/" + std::to_string(pid.value));
  return it->second;
}

void ForeignFiles::resolve(std::vector<LifecycleEvent>& events, size_t from) {
  for (size_t i = from; i < events.size(); ++i) {
    // A new process behind the pid, or an exec (often just after unshare): look again.
    if (auto* fork = std::get_if<ForkEvent>(&events[i].payload)) {
      namespace_by_pid_.erase(fork->child_pid);
      continue;
    }
    if (auto* reset = std::get_if<AddressSpaceResetEvent>(&events[i].payload)) {
      namespace_by_pid_.erase(reset->pid);
      continue;
    }
    auto* mmap = std::get_if<MmapEvent>(&events[i].payload);
    if (!mmap || mmap->mapping.path.empty() || mmap->mapping.path[0] != '/') continue;
    const uint64_t ns = namespace_of(mmap->pid);
    if (ns == 0 || ns == own_namespace_) continue;
    mmap->mapping.mount_namespace = ns;
    auto key = std::make_pair(ns, mmap->mapping.path);
    auto it = files_.find(key);
    if (it == files_.end()) {
      std::string through_root = "/proc/" + std::to_string(mmap->pid.value) + "/root" + mmap->mapping.path;
      UniqueFd fd(open(through_root.c_str(), O_RDONLY | O_CLOEXEC));
      if (!fd.valid()) continue;  // gone already: the plain path is the best guess left
      it = files_.emplace(key, std::move(fd)).first;
    }
    mmap->mapping.access_path = "/proc/self/fd/" + std::to_string(it->second.get());
  }
}

}  // namespace bpfprof
