#include "userspace/capture/mapped_files.h"

#include <sys/stat.h>

#include <cinttypes>
#include <cstdio>

#include "symbols/elf/elf_file.h"
#include "symbols/util/mapping_kind.h"
#include "symbols/util/text.h"

namespace bpfprof {

uint64_t mount_namespace_id(const std::string& proc_pid_dir) {
  struct stat st;
  if (stat((proc_pid_dir + "/ns/mnt").c_str(), &st) != 0) return 0;
  return static_cast<uint64_t>(st.st_ino);
}

MappedFiles::MappedFiles() : own_namespace_(mount_namespace_id("/proc/self")) {}

uint64_t MappedFiles::namespace_of(Pid pid) {
  auto [it, inserted] = namespace_by_pid_.try_emplace(pid, 0);
  if (inserted) it->second = mount_namespace_id("/proc/" + std::to_string(pid.value));
  return it->second;
}

HeldFileRef MappedFiles::hold(const std::string& key, const std::string& proc_path,
                              const std::string& root) {
  auto it = files_.find(key);
  if (it == files_.end()) {
    HeldFileRef file =
        root.empty() ? HeldFile::open(proc_path) : HeldFile::open_in_root(root, proc_path);
    if (!file) return nullptr;  // gone already: the plain path is the best guess left
    it = files_.emplace(key, std::move(file)).first;
  }
  return it->second;
}

const std::string& MappedFiles::build_id_of(const std::string& key, const HeldFile& file) {
  auto [it, inserted] = build_ids_.try_emplace(key);
  if (inserted) {
    std::vector<uint8_t> id = read_elf_build_id(file.fd());
    it->second.assign(id.begin(), id.end());
  }
  return it->second;
}

void MappedFiles::resolve(std::vector<LifecycleEvent>& events, size_t from) {
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
    if (!mmap || classify_mapping(mmap->mapping.path) != MappingKind::kFile) continue;
    MappingInfo& m = mmap->mapping;
    const std::string pid_dir = "/proc/" + std::to_string(mmap->pid.value);
    const uint64_t ns = namespace_of(mmap->pid);
    HeldFileRef file;
    if (ns != 0 && ns != own_namespace_) {
      m.mount_namespace = ns;
      file = hold(std::to_string(ns) + ":" + m.path, m.path, pid_dir + "/root");
    } else if (!m.build_id.empty()) {
      // Reported by the kernel as it was mapped: opened now, while the process surely has
      // it mapped, so that a binary deleted or replaced before the end is still read.
      char range[64];
      snprintf(range, sizeof(range), "/map_files/%" PRIx64 "-%" PRIx64, m.start,
               m.start + m.length);
      file = hold("build-id " + hex_string(m.build_id) + ":" + m.path, pid_dir + range);
    } else if (m.inode != 0) {
      // A mapping from a /proc snapshot at attach (MMAP2 records come with a build-id
      // instead): its file is opened now, so that replacing or deleting it later changes
      // nothing. One fd per file, however many processes map it.
      char range[64];
      snprintf(range, sizeof(range), "/map_files/%" PRIx64 "-%" PRIx64, m.start,
               m.start + m.length);
      const std::string key = "file " + std::to_string(m.dev_major) + ":" +
                              std::to_string(m.dev_minor) + ":" + std::to_string(m.inode);
      file = hold(key, pid_dir + range);
      // With its build-id, the file is the same library as in the kernel's later MMAP2
      // records of other processes (which carry the build-id instead of device and inode).
      if (file) m.build_id = build_id_of(key, *file);
    }
    m.held_file = std::move(file);
  }
}

}  // namespace bpfprof
