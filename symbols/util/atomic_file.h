// A file that appears complete or not at all: written as a uniquely named temporary file
// beside the target and renamed onto it by commit(); removed by the destructor otherwise.
// Used for profiles (output/) and for the unwind-table cache (symbols/dwarf).
// A target that exists and is not a regular file (/dev/null, /dev/stdout, a FIFO) is written
// in place: renaming onto it would replace the device or pipe with a file. A symbolic link
// keeps pointing to the file it names, which is replaced.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <string_view>

#include "symbols/util/unique_handle.h"

namespace bpfprof {

struct AtomicFileOptions {
  // The file's mode whatever the umask (a shared cache); unset: 0666 minus the umask, as
  // for any newly created file (a profile).
  std::optional<mode_t> exact_mode{};
  // fsync the file before the rename and the directory after it. A cache can do without:
  // a file cut short by a crash fails its checks on load and is rebuilt.
  bool durable = true;
};

// Errors throw std::runtime_error with one line naming the target path.
class AtomicReplaceFile {
 public:
  explicit AtomicReplaceFile(std::string target_path, AtomicFileOptions options = {});
  AtomicReplaceFile(const AtomicReplaceFile&) = delete;
  AtomicReplaceFile& operator=(const AtomicReplaceFile&) = delete;
  ~AtomicReplaceFile();

  // Writes all of `data`, retrying short writes and EINTR.
  void write_all(std::string_view data);
  // (fsync,) close and rename onto the target.
  void commit();

  const std::string& target_path() const { return target_path_; }
  // Empty when the target is written in place.
  const std::string& temp_path() const { return temp_path_; }
  bool committed() const { return committed_; }

 private:
  [[noreturn]] void fail(const char* action, int err);

  std::string target_path_;
  std::string replaced_path_;  // the target, or the file a symbolic link there names
  AtomicFileOptions options_;
  std::string temp_path_;
  UniqueFd fd_;
  bool committed_ = false;
};

// `path` and its parents as directories of mode 0755 (whatever the umask), for a shared cache;
// false with `error` set when one cannot be made.
bool make_directories(const std::string& path, std::string& error);

}  // namespace bpfprof
