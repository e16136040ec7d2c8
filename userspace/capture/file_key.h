// A file as the kernel names it in the BPF maps (bpf/unwind_maps.h's bpfprof_file_key): its
// superblock's device in the kernel's encoding (major << 20 | minor, not glibc's) and its inode.
#pragma once

#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <optional>
#include <string>

#include "bpf/unwind_maps.h"

namespace bpfprof {

inline bpfprof_file_key file_key_of(const struct stat& status) {
  return bpfprof_file_key{uint64_t{major(status.st_dev)} << 20 | minor(status.st_dev),
                          status.st_ino};
}

inline std::optional<bpfprof_file_key> file_key_of(const std::string& path) {
  struct stat status;
  if (stat(path.c_str(), &status) != 0) return std::nullopt;
  return file_key_of(status);
}

inline bool same_file(const bpfprof_file_key& a, const bpfprof_file_key& b) {
  return a.dev == b.dev && a.inode == b.inode;
}

}  // namespace bpfprof
