#include "symbols/elf/symbol_cache.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>

namespace bpfprof {

std::shared_ptr<const ElfFile> ElfCache::get(const std::string& path, std::string* error) {
  std::lock_guard lock(mutex_);
  auto remember = [&](const std::shared_ptr<const Entry>& entry) {
    by_path_.emplace(path, entry);
    if (error != nullptr) *error = entry->error;
    return entry->file;
  };

  if (auto known = by_path_.find(path); known != by_path_.end()) {
    if (error != nullptr) *error = known->second->error;
    return known->second->file;
  }

  struct stat file_status;
  if (::stat(path.c_str(), &file_status) != 0) {
    return remember(
        std::make_shared<const Entry>(Entry{nullptr, path + ": " + std::strerror(errno)}));
  }
  const FileIdentity identity{file_status.st_dev, file_status.st_ino};
  if (auto known = by_identity_.find(identity); known != by_identity_.end()) {
    return remember(known->second);
  }

  // Opening under the lock keeps "each file once" simple; files open in a few milliseconds.
  ++open_attempts_;
  Entry entry;
  entry.file = ElfFile::open(path, &entry.error);
  auto shared_entry = std::make_shared<const Entry>(std::move(entry));
  by_identity_.emplace(identity, shared_entry);
  return remember(shared_entry);
}

size_t ElfCache::path_count() const {
  std::lock_guard lock(mutex_);
  return by_path_.size();
}

size_t ElfCache::open_attempts() const {
  std::lock_guard lock(mutex_);
  return open_attempts_;
}

}  // namespace bpfprof
