#include "symbols/util/held_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <optional>
#include <vector>

#include "symbols/util/mapping_kind.h"
#include "symbols/util/proc_maps.h"
#include "symbols/util/untrusted_file.h"

namespace bpfprof {

HeldFile::HeldFile(UniqueFd fd)
    : fd_(std::move(fd)), path_("/proc/self/fd/" + std::to_string(fd_.get())) {}

std::shared_ptr<const HeldFile> HeldFile::open(const std::string& path) {
  return adopt(open_untrusted(path, UntrustedKind::kBinary).fd);
}

std::shared_ptr<const HeldFile> HeldFile::open_in_root(const std::string& root,
                                                       const std::string& path) {
  return adopt(open_untrusted_in_root(root, path, UntrustedKind::kBinary).fd);
}

std::shared_ptr<const HeldFile> HeldFile::adopt(UniqueFd fd) {
  if (!fd.valid()) return nullptr;
  return std::shared_ptr<const HeldFile>(new HeldFile(std::move(fd)));
}

const std::string& readable_path(const std::string& reported_path, const HeldFileRef& held) {
  if (classify_mapping(reported_path) == MappingKind::kVdso && !vdso_image_path().empty())
    return vdso_image_path();
  return held ? held->path() : reported_path;
}

namespace {

HeldFileRef copy_of_own_vdso() {
  std::optional<std::vector<MapEntry>> maps = read_proc_maps(getpid());
  for (const MapEntry& m : maps.value_or(std::vector<MapEntry>{})) {
    if (m.kind() != MappingKind::kVdso) continue;
    UniqueFd fd(memfd_create("bpfprof-vdso", MFD_CLOEXEC));
    if (!fd.valid()) return nullptr;
    const auto* image = reinterpret_cast<const char*>(m.start);
    const auto size = static_cast<ssize_t>(m.end - m.start);
    if (write(fd.get(), image, size) != size) return nullptr;
    // Read-only from now on: the copy counts as written by bpfprof alone, and its unwind table
    // is cached by its build-id like a system library's, not built at every start.
    if (fchmod(fd.get(), 0400) != 0) return nullptr;
    return HeldFile::adopt(std::move(fd));
  }
  return nullptr;
}

}  // namespace

const std::string& vdso_image_path() {
  static const HeldFileRef image = copy_of_own_vdso();  // kept for the run
  static const std::string none;
  return image ? image->path() : none;
}

}  // namespace bpfprof
