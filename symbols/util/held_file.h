// A file opened while its path still led to it, and kept open for as long as anything refers
// to it: a container's file (its path is another mount namespace's), or a binary that may be
// deleted or replaced before the recording ends. Shared by the mapping events, the model's
// libraries and the unwinders; the fd closes with the last of them, so the path this hands
// out can never name another file that reused the fd.
#pragma once

#include <memory>
#include <string>

#include "symbols/util/unique_handle.h"

namespace bpfprof {

class HeldFile {
 public:
  // Opens `path` read-only as an untrusted binary (untrusted_file.h: a regular file, copied
  // when a user could still change it); nullptr if it cannot be opened or is refused.
  static std::shared_ptr<const HeldFile> open(const std::string& path);
  // `path` inside the root directory `root` (/proc/PID/root), links resolved inside it.
  static std::shared_ptr<const HeldFile> open_in_root(const std::string& root,
                                                      const std::string& path);
  // Takes an fd opened elsewhere (e.g. a memfd); nullptr if it is not valid.
  static std::shared_ptr<const HeldFile> adopt(UniqueFd fd);

  int fd() const { return fd_.get(); }
  // "/proc/self/fd/N": opens the held file again, valid while this object lives.
  const std::string& path() const { return path_; }

 private:
  explicit HeldFile(UniqueFd fd);

  UniqueFd fd_;
  std::string path_;
};

using HeldFileRef = std::shared_ptr<const HeldFile>;

// Where to read a mapped file now: the kernel's vDSO image for "[vdso]", the held file if
// there is one, else the path as the kernel reported it.
const std::string& readable_path(const std::string& reported_path, const HeldFileRef& held);

// A mapped file as the unwinders keep it: the path the kernel reported (which names it and
// says what kind of mapping it is) and, where that path may not lead to it later, the file
// held open. Holding the reference keeps readable_path() naming this very file.
struct MappedFile {
  std::string path;
  HeldFileRef held;

  const std::string& readable_path() const { return bpfprof::readable_path(path, held); }
};

// A readable file holding the vDSO image (empty if unavailable): the kernel maps the same
// image into every process, so bpfprof's own copy serves for all.
const std::string& vdso_image_path();

}  // namespace bpfprof
