// Symbols are read at the end of the recording, from the mapped files. Where a mapping's
// path will not lead to its file then, the file is opened while the process lives and kept
// open until the end:
// - a process in another mount namespace (a container): PATH inside /proc/PID/root, its
//   links resolved inside that root;
// - every file the kernel reports mapped (MMAP2, with its build-id), when the record is
//   read: through /proc/PID/map_files/START-END, so a binary deleted later is still read;
// - every file mapped by a process we attach to (-p, -a), at attach: through
//   /proc/PID/map_files/START-END, so that deleting or replacing it later changes nothing.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "symbols/util/held_file.h"
#include "userspace/model/ids.h"
#include "userspace/model/recording.h"

namespace bpfprof {

class MappedFiles {
 public:
  MappedFiles();

  // Sets `mount_namespace` and, where the path would not do, `held_file` on every
  // mapping event in `events` from index `from` on.
  void resolve(std::vector<LifecycleEvent>& events, size_t from);
  size_t open_files() const { return files_.size(); }

 private:
  uint64_t namespace_of(Pid pid);
  // The file, opened through `proc_path` once per key (nullptr if it cannot be opened); with
  // a `root`, `proc_path` is resolved inside that root directory.
  HeldFileRef hold(const std::string& key, const std::string& proc_path,
                   const std::string& root = {});
  // The build-id (raw bytes) of the file held under `key`, read once.
  const std::string& build_id_of(const std::string& key, const HeldFile& file);
  std::map<std::string, std::string> build_ids_;

  uint64_t own_namespace_ = 0;
  std::unordered_map<Pid, uint64_t> namespace_by_pid_;
  std::map<std::string, HeldFileRef> files_;
};

// The inode number of a /proc/PID/ns/mnt link ("mnt:[4026531841]"), 0 if unreadable.
uint64_t mount_namespace_id(const std::string& proc_pid_dir);

}  // namespace bpfprof
