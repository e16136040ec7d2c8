// Parsing of /proc/<pid>/maps: which file (and which offset in it) backs each address range.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "symbols/util/mapping_kind.h"

namespace bpfprof {

struct MapEntry {
  uint64_t start = 0;        // first address of the mapping
  uint64_t end = 0;          // one past the last address
  uint64_t file_offset = 0;  // file offset mapped at `start`
  bool readable = false;
  bool writable = false;
  bool executable = false;
  bool is_private = false;  // 'p' (copy-on-write) rather than 's' (shared)
  uint32_t dev_major = 0;
  uint32_t dev_minor = 0;
  uint64_t inode = 0;
  // As the kernel prints it: empty for anonymous memory, "[vdso]"/"[stack]"/... for special
  // mappings, may contain spaces, and ends in " (deleted)" once the file was unlinked.
  std::string path;

  bool contains(uint64_t address) const { return address >= start && address < end; }
  MappingKind kind() const { return classify_mapping(path); }
  bool is_deleted() const;
  // `path` without a trailing " (deleted)".
  std::string_view path_without_deleted_suffix() const;
};

// Parses the text of a maps file; lines that do not match the kernel's format are skipped.
std::vector<MapEntry> parse_proc_maps(std::string_view text);

// Reads and parses /proc/<pid>/maps; nullopt if the file cannot be read (process gone,
// no permission).
std::optional<std::vector<MapEntry>> read_proc_maps(int pid);

}  // namespace bpfprof
