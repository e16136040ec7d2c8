// Opens each ELF file once, however many processes map it and under however many paths
// (/proc/<pid>/root/usr/lib/... and /usr/lib/... name the same file).
#pragma once

#include <sys/types.h>

#include <compare>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "symbols/elf/elf_file.h"

namespace bpfprof {

class ElfCache {
 public:
  // The opened file, or nullptr if it could not be opened (then *error, if given, says why).
  // Failures are remembered: a bad file is only tried once. Thread-safe.
  std::shared_ptr<const ElfFile> get(const std::string& path, std::string* error = nullptr);

  // Number of distinct paths asked about so far.
  size_t path_count() const;
  // Number of ElfFile::open attempts made (successful or not).
  size_t open_attempts() const;

 private:
  struct FileIdentity {
    dev_t device;
    ino_t inode;
    auto operator<=>(const FileIdentity&) const = default;
  };
  struct Entry {
    std::shared_ptr<const ElfFile> file;  // nullptr when opening failed
    std::string error;
  };

  mutable std::mutex mutex_;
  std::unordered_map<std::string, std::shared_ptr<const Entry>> by_path_;
  std::map<FileIdentity, std::shared_ptr<const Entry>> by_identity_;
  size_t open_attempts_ = 0;
};

}  // namespace bpfprof
