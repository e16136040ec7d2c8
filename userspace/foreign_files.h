// A mapping's path means something only in its process's mount namespace. For a process in
// another namespace (a container), the file is opened through /proc/PID/root while the
// process lives, and kept open so it can be read at the end even after the process is gone.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "userspace/ids.h"
#include "userspace/recording.h"
#include "userspace/unique_fd.h"

namespace bpfprof {

class ForeignFiles {
 public:
  ForeignFiles();

  // Sets `mount_namespace` and, for a foreign namespace, `access_path` on every mapping
  // event in `events` from index `from` on.
  void resolve(std::vector<LifecycleEvent>& events, size_t from);
  size_t open_files() const { return files_.size(); }

 private:
  uint64_t namespace_of(Pid pid);

  uint64_t own_namespace_ = 0;
  std::unordered_map<Pid, uint64_t> namespace_by_pid_;
  std::map<std::pair<uint64_t, std::string>, UniqueFd> files_;
};

// The inode number of a /proc/PID/ns/mnt link ("mnt:[4026531841]"), 0 if unreadable.
uint64_t mount_namespace_id(const std::string& proc_pid_dir);

}  // namespace bpfprof
