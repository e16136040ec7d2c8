// The libraries that processes map and each followed process's executable mappings, with
// those of the processes that exited last (their last samples come after the exit).
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "symbols/util/mapping_ranges.h"
#include "userspace/model/frame_key.h"
#include "userspace/model/ids.h"
#include "userspace/model/recording.h"

namespace bpfprof {

struct Library {
  std::string path{};  // as the kernel reported it
  uint32_t dev_major = 0;
  uint32_t dev_minor = 0;
  uint64_t inode = 0;
  std::string build_id{};        // raw bytes, when reported with the mapping
  uint64_t mount_namespace = 0;  // non-zero: the path is another mount namespace's
  HeldFileRef held_file{};       // the file held open, when `path` may not lead to it

  // Set for the "[anon]" library of a process: its anonymous executable memory (JIT code),
  // named through the process's /tmp/perf-PID.map if it writes one.
  std::optional<Pid> anonymous_memory_of{};

  const std::string& readable_path() const { return bpfprof::readable_path(path, held_file); }
};

struct Mapping {
  uint64_t start = 0;
  uint64_t end = 0;
  uint64_t file_offset = 0;
  LibId lib;
};

// The executable mappings of one process at the current replay time.
using AddressSpace = AddressSpaceOf<Mapping>;

class AddressSpaces {
 public:
  AddressSpaces();

  // The process `pid` is followed from now on with no mappings (a new or reset one).
  void start(Pid pid) { spaces_[pid] = AddressSpace{}; }
  // Followed from now on, keeping its mappings if it already is.
  void follow(Pid pid) { spaces_.try_emplace(pid); }
  // A forked child starts with a copy of its parent's address space.
  void fork(Pid parent, Pid child) { spaces_[child] = spaces_[parent]; }
  // Its mappings are gone (an exec's reset), if it is followed.
  void reset(Pid pid);
  // A new executable mapping of a followed process.
  void map(Pid pid, const MappingInfo& mapping);
  // The process exited: its mappings stay, for its last samples, among the last exited.
  void exited(Pid pid);
  // The mappings of a live process, else of one of the last exited; null if neither.
  const AddressSpace* find(Pid pid) const;

  const std::vector<Library>& libraries() const { return libraries_; }
  const Library& library(LibId id) const { return libraries_[static_cast<size_t>(id.value)]; }

 private:
  LibId intern_library(const MappingInfo& mapping);
  LibId anonymous_library(Pid pid);

  std::vector<Library> libraries_;
  std::map<std::tuple<std::string, uint64_t, std::string, uint32_t, uint32_t, uint64_t>, LibId>
      library_index_;
  std::unordered_map<Pid, LibId> anonymous_libraries_;
  std::unordered_map<Pid, AddressSpace> spaces_;
  // The last processes to exit, newest last: their last task samples on its way out after
  // the exit tracepoint too, with its mappings still in place (kept: kExitedSpacesKept).
  std::deque<std::pair<Pid, AddressSpace>> exited_;
};

}  // namespace bpfprof
