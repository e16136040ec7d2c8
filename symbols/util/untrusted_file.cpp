#include "symbols/util/untrusted_file.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <mutex>
#include <unordered_set>

#include "symbols/util/read_file.h"
#include "symbols/util/text.h"

namespace bpfprof {

namespace {

constexpr uint64_t kMiB = 1024 * 1024;
constexpr uint64_t kGiB = 1024 * kMiB;
// Copies of files a user could still change live in memory for the whole run: a machine's
// worth of user-built binaries fits (a big Go or Rust service is 50-200 MB), and a user who
// maps many large files gets their later ones refused instead of the machine's memory.
constexpr uint64_t kCopyBudget = 2 * kGiB;

struct RefusalLog {
  std::mutex mutex;
  std::vector<std::string> messages;
  std::unordered_set<std::string> seen;
  uint64_t count = 0;
  uint64_t copy_bytes = 0;
};

RefusalLog& log() {
  static RefusalLog instance;
  return instance;
}

Refusal refuse(RefusalReason reason, UntrustedKind kind, const std::string& name,
               const std::string& why) {
  Refusal refusal{reason, std::string(untrusted_kind_name(kind)) + " " + name + " ignored: " + why};
  RefusalLog& l = log();
  std::lock_guard lock(l.mutex);
  ++l.count;
  if (l.seen.insert(refusal.message).second) l.messages.push_back(refusal.message);
  return refusal;
}

std::string mib_text(uint64_t bytes) { return std::to_string(bytes / kMiB) + " MiB"; }

constexpr int kContentSeals = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE;

bool trusted_writer_only(const struct stat& st) {
  return (st.st_uid == 0 || st.st_uid == geteuid()) && (st.st_mode & (S_IWGRP | S_IWOTH)) == 0;
}

// Whether another user could change the file's contents from now on (a memfd sealed against
// writes, such as our own copies, cannot change at all).
bool changeable_by_users(int fd, const struct stat& st) {
  const int seals = fcntl(fd, F_GET_SEALS);
  if (seals > 0 && (seals & kContentSeals) == kContentSeals) return false;
  return !trusted_writer_only(st);
}

bool reserve_copy(uint64_t bytes) {
  RefusalLog& l = log();
  std::lock_guard lock(l.mutex);
  if (l.copy_bytes + bytes > kCopyBudget) return false;
  l.copy_bytes += bytes;
  return true;
}

// The first `size` bytes of `fd` in a memfd sealed against any change; invalid on failure.
UniqueFd sealed_copy(int fd, uint64_t size) {
  UniqueFd copy(memfd_create("bpfprof-copy", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (!copy) return {};
  off_t in_offset = 0;
  uint64_t done = 0;
  while (done < size) {
    const ssize_t got = sendfile(copy.get(), fd, &in_offset, size - done);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;  // shortened meanwhile: what was there
    done += static_cast<uint64_t>(got);
  }
  if (fcntl(copy.get(), F_ADD_SEALS, kContentSeals | F_SEAL_SEAL) != 0) return {};
  return copy;
}

std::optional<Refusal> owner_refusal(const struct stat& st, const std::string& name,
                                     UntrustedKind kind, const OwnerRule& rule) {
  if (st.st_uid != 0 && st.st_uid != rule.process_uid)
    return refuse(RefusalReason::kForeignOwner, kind, name,
                  "owned by uid " + std::to_string(st.st_uid) + ", not by the process's uid " +
                      std::to_string(rule.process_uid) + " or root");
  if (st.st_mode & S_IWOTH)
    return refuse(RefusalReason::kWritableByOthers, kind, name, "writable by every user");
  return std::nullopt;
}

UntrustedOpen checked(UniqueFd fd, const std::string& name, UntrustedKind kind,
                      const std::optional<OwnerRule>& owner, Copying copying) {
  UntrustedOpen out;
  struct stat st {};
  if (fstat(fd.get(), &st) != 0) return out;
  if (!S_ISREG(st.st_mode)) {
    out.refusal = refuse(RefusalReason::kNotRegular, kind, name, "not a regular file");
    return out;
  }
  const auto size = static_cast<uint64_t>(st.st_size);
  if (size > untrusted_size_cap(kind)) {
    out.refusal = refuse(RefusalReason::kTooLarge, kind, name,
                         mib_text(size) + ", over the " + mib_text(untrusted_size_cap(kind)) +
                             " read of a " + std::string(untrusted_kind_name(kind)));
    return out;
  }
  if (owner && (out.refusal = owner_refusal(st, name, kind, *owner))) return out;
  // Read whole and at once (perf maps, metadata): one read of one descriptor is consistent.
  // Mapped kinds (binaries, debug files) are copied when a user could still change them.
  const bool mapped = kind == UntrustedKind::kBinary || kind == UntrustedKind::kDebugFile;
  if (mapped && copying == Copying::kWhenChangeable && changeable_by_users(fd.get(), st)) {
    if (!reserve_copy(size)) {
      out.refusal = refuse(RefusalReason::kCopyBudgetUsed, kind, name,
                           "changeable by its owner and the " + mib_text(kCopyBudget) +
                               " for copies of such files is used up");
      return out;
    }
    fd = sealed_copy(fd.get(), size);
    if (!fd) return out;
    out.copied = true;
  }
  out.size = size;
  out.fd = std::move(fd);
  return out;
}

}  // namespace

std::string_view untrusted_kind_name(UntrustedKind kind) {
  switch (kind) {
    case UntrustedKind::kBinary:
      return "binary";
    case UntrustedKind::kDebugFile:
      return "debug file";
    case UntrustedKind::kPerfMap:
      return "perf map";
    case UntrustedKind::kJitDump:
      return "JIT dump";
    case UntrustedKind::kRuntimeMetadata:
      return "runtime metadata";
    case UntrustedKind::kUnwindCache:
      return "unwind-table cache file";
    case UntrustedKind::kSource:
      return "source file";
  }
  return "file";
}

// The caps are far above real files of each kind and far below a machine's memory:
// binaries and debug files are mapped, not read (Chromium's debug file is ~3 GB), perf maps
// and the rest are read whole.
uint64_t untrusted_size_cap(UntrustedKind kind) {
  switch (kind) {
    case UntrustedKind::kBinary:
      return 4 * kGiB;
    case UntrustedKind::kDebugFile:
      return 8 * kGiB;
    case UntrustedKind::kPerfMap:
      return 256 * kMiB;  // ~3M functions of a long-lived JIT
    case UntrustedKind::kJitDump:
      return 1 * kGiB;
    case UntrustedKind::kRuntimeMetadata:
      return 64 * kMiB;
    case UntrustedKind::kUnwindCache:
      return 512 * kMiB;  // libLLVM's table is ~34 MB
    case UntrustedKind::kSource:
      return 16 * kMiB;
  }
  return 0;
}

UntrustedOpen open_untrusted(const std::string& path, UntrustedKind kind,
                             std::optional<OwnerRule> owner, Copying copying) {
  int flags = O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY;
  const bool shared = in_world_writable_directory(path);
  if (shared) flags |= O_NOFOLLOW;
  UniqueFd fd(::open(path.c_str(), flags));
  if (!fd) {
    UntrustedOpen out;
    if (errno == ELOOP && shared)
      out.refusal = refuse(RefusalReason::kLinkInSharedDir, kind, path,
                           "a symbolic link in a directory every user can write to");
    return out;
  }
  return checked(std::move(fd), path, kind, owner, copying);
}

UntrustedOpen open_untrusted_in_root(const std::string& root, const std::string& path,
                                     UntrustedKind kind) {
  UniqueFd root_fd(::open(root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!root_fd) return {};
  // Absolute links and ".." resolve inside `root`, as the process itself sees its files.
  open_how how{};
  how.flags = O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY;
  how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
  const size_t first = path.find_first_not_of('/');
  const std::string relative = first == std::string::npos ? std::string() : path.substr(first);
  UniqueFd fd(
      static_cast<int>(syscall(SYS_openat2, root_fd.get(), relative.c_str(), &how, sizeof(how))));
  if (!fd) return {};
  return checked(std::move(fd), root + path, kind, std::nullopt, Copying::kWhenChangeable);
}

namespace {

// The first `file.size` bytes, from its one descriptor (what a file that grows meanwhile has
// beyond them is left for the next read).
std::string read_opened(const UntrustedOpen& file) {
  std::string contents(file.size, '\0');
  // Shortened meanwhile: what was there.
  contents.resize(pread_up_to(file.fd.get(), contents.data(), contents.size(), 0));
  return contents;
}

}  // namespace

std::optional<std::string> read_untrusted(const std::string& path, UntrustedKind kind,
                                          std::optional<OwnerRule> owner) {
  UntrustedOpen file = open_untrusted(path, kind, owner);
  if (!file.fd) return std::nullopt;
  return read_opened(file);
}

std::optional<std::string> read_regular_file(const std::string& path, uint64_t max_bytes) {
  UntrustedOpen file = open_untrusted(path, UntrustedKind::kSource);
  if (!file.fd || file.size > max_bytes) return std::nullopt;
  return read_opened(file);
}

bool written_by_us_or_root_only(int fd) {
  struct stat st {};
  return fstat(fd, &st) == 0 && trusted_writer_only(st);
}

bool in_world_writable_directory(const std::string& path) {
  struct stat dir {};
  return stat(directory_name(path).c_str(), &dir) == 0 && (dir.st_mode & S_IWOTH) != 0;
}

std::optional<uint32_t> process_effective_uid(int pid) {
  const std::optional<std::string> status =
      read_entire_file("/proc/" + std::to_string(pid) + "/status");
  if (!status) return std::nullopt;
  const size_t at = status->find("\nUid:");
  if (at == std::string::npos) return std::nullopt;
  // "Uid:\treal\teffective\tsaved\tfs"
  unsigned long real = 0, effective = 0;
  if (sscanf(status->c_str() + at + 5, "%lu %lu", &real, &effective) != 2) return std::nullopt;
  return static_cast<uint32_t>(effective);
}

std::vector<std::string> untrusted_file_refusals() {
  std::lock_guard lock(log().mutex);
  return log().messages;
}

uint64_t untrusted_file_refusal_count() {
  std::lock_guard lock(log().mutex);
  return log().count;
}

uint64_t untrusted_copy_bytes() {
  std::lock_guard lock(log().mutex);
  return log().copy_bytes;
}

void reset_untrusted_file_log() {
  RefusalLog& l = log();
  std::lock_guard lock(l.mutex);
  l.messages.clear();
  l.seen.clear();
  l.count = 0;
  l.copy_bytes = 0;
}

}  // namespace bpfprof
