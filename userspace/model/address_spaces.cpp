#include "userspace/model/address_spaces.h"

#include "symbols/util/mapping_kind.h"

namespace bpfprof {

// Enough for the exits that can come between one and its process's last samples (the model
// takes events in time order; those samples follow the exit by microseconds).
constexpr size_t kExitedSpacesKept = 64;

AddressSpaces::AddressSpaces() {
  libraries_.push_back(Library{.path = "[kernel.kallsyms]"});  // kKernelLib
}

void AddressSpaces::reset(Pid pid) {
  auto space = spaces_.find(pid);
  if (space != spaces_.end()) space->second = AddressSpace{};
}

void AddressSpaces::map(Pid pid, const MappingInfo& mapping) {
  auto space = spaces_.find(pid);
  if (space == spaces_.end()) return;  // not a process we follow
  Mapping m;
  m.start = mapping.start;
  m.end = mapping.start + mapping.length;
  m.file_offset = mapping.file_offset;
  if (classify_mapping(mapping.path) == MappingKind::kAnonymousCode) {
    m.lib = anonymous_library(pid);
    m.file_offset = m.start;  // frames keep their absolute address
  } else {
    m.lib = intern_library(mapping);
  }
  space->second.add(m);
}

void AddressSpaces::exited(Pid pid) {
  if (auto space = spaces_.find(pid); space != spaces_.end()) {
    exited_.emplace_back(pid, std::move(space->second));
    if (exited_.size() > kExitedSpacesKept) exited_.pop_front();
    spaces_.erase(space);
  }
}

const AddressSpace* AddressSpaces::find(Pid pid) const {
  if (auto it = spaces_.find(pid); it != spaces_.end()) return &it->second;
  for (auto it = exited_.rbegin(); it != exited_.rend(); ++it)
    if (it->first == pid) return &it->second;
  return nullptr;
}

LibId AddressSpaces::intern_library(const MappingInfo& mapping) {
  // The same path in two mount namespaces, or a file replaced under the same path, is a
  // different library. A file is known by its build-id where it has one: the kernel's MMAP2
  // records carry the build-id instead of device and inode, /proc snapshots the other way
  // round (MappedFiles adds the build-id), and both must name one library.
  const bool by_build_id = !mapping.build_id.empty();
  auto key = std::make_tuple(mapping.path, mapping.mount_namespace, mapping.build_id,
                             by_build_id ? 0 : mapping.dev_major,
                             by_build_id ? 0 : mapping.dev_minor, by_build_id ? 0 : mapping.inode);
  auto [it, inserted] =
      library_index_.try_emplace(key, LibId{static_cast<int32_t>(libraries_.size())});
  if (inserted) {
    libraries_.push_back(Library{.path = mapping.path,
                                 .dev_major = mapping.dev_major,
                                 .dev_minor = mapping.dev_minor,
                                 .inode = mapping.inode,
                                 .build_id = mapping.build_id,
                                 .mount_namespace = mapping.mount_namespace,
                                 .held_file = mapping.held_file});
  }
  return it->second;
}

LibId AddressSpaces::anonymous_library(Pid pid) {
  auto [it, inserted] =
      anonymous_libraries_.try_emplace(pid, LibId{static_cast<int32_t>(libraries_.size())});
  if (inserted) {
    Library lib;
    lib.path = "[anon]";
    lib.anonymous_memory_of = pid;
    libraries_.push_back(std::move(lib));
  }
  return it->second;
}

}  // namespace bpfprof
