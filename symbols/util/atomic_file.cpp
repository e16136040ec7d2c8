#include "symbols/util/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <random>
#include <stdexcept>
#include <system_error>

#include "symbols/util/text.h"

namespace bpfprof {

namespace {

std::string error_text(int err) { return std::generic_category().message(err); }

std::string random_suffix(std::mt19937_64& rng) {
  static constexpr std::string_view kAlphabet =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  std::string suffix(6, '\0');
  for (char& c : suffix) c = kAlphabet[rng() % kAlphabet.size()];
  return suffix;
}

}  // namespace

AtomicReplaceFile::AtomicReplaceFile(std::string target_path, AtomicFileOptions options)
    : target_path_(std::move(target_path)), replaced_path_(target_path_), options_(options) {
  struct stat target;
  if (::stat(target_path_.c_str(), &target) == 0 && !S_ISREG(target.st_mode)) {
    if (S_ISDIR(target.st_mode)) fail("write", EISDIR);
    int fd = ::open(target_path_.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) fail("open", errno);
    fd_.reset(fd);
    return;
  }
  // A symbolic link to a file: replace the file, not the link (beside it, on its filesystem).
  struct stat link;
  if (::lstat(target_path_.c_str(), &link) == 0 && S_ISLNK(link.st_mode)) {
    if (char* resolved = ::realpath(target_path_.c_str(), nullptr)) {
      replaced_path_ = resolved;
      free(resolved);
    }
  }
  // Not mkstemp(): it creates files 0600, and a profile should get the usual 0666 & ~umask.
  std::mt19937_64 rng{std::random_device{}()};
  constexpr int kAttempts = 100;
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    std::string candidate = replaced_path_ + ".tmp." + random_suffix(rng);
    int fd = ::open(candidate.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd >= 0) {
      fd_.reset(fd);
      temp_path_ = std::move(candidate);
      if (options_.exact_mode && ::fchmod(fd, *options_.exact_mode) != 0) fail("chmod", errno);
      return;
    }
    if (errno != EEXIST) fail("create", errno);
  }
  fail("create", EEXIST);
}

AtomicReplaceFile::~AtomicReplaceFile() {
  if (committed_ || temp_path_.empty()) return;  // nothing to remove in place
  fd_.reset();
  ::unlink(temp_path_.c_str());
}

void AtomicReplaceFile::fail(const char* action, int err) {
  throw std::runtime_error(std::string("cannot ") + action + " " + target_path_ + ": " +
                           error_text(err));
}

void AtomicReplaceFile::write_all(std::string_view data) {
  if (committed_) throw std::logic_error("write to " + target_path_ + " after commit");
  while (!data.empty()) {
    ssize_t n = ::write(fd_.get(), data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      fail("write", errno);
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
}

void AtomicReplaceFile::commit() {
  if (committed_) throw std::logic_error(target_path_ + " committed twice");
  if (temp_path_.empty()) {  // written in place: a device or a pipe has nothing to sync
    if (::close(fd_.release()) != 0) fail("close", errno);
    committed_ = true;
    return;
  }
  if (options_.durable && ::fsync(fd_.get()) != 0) fail("sync", errno);
  // close() can report deferred write errors (NFS); it must not be retried on EINTR.
  if (::close(fd_.release()) != 0) fail("close", errno);
  if (::rename(temp_path_.c_str(), replaced_path_.c_str()) != 0)
    fail("rename temporary file to", errno);
  committed_ = true;
  if (!options_.durable) return;
  // Make the rename itself durable. Best effort: the file is complete either way, and
  // some filesystems refuse fsync on directories.
  UniqueFd dir{::open(directory_name(replaced_path_).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)};
  if (dir.valid()) ::fsync(dir.get());
}

bool make_directories(const std::string& path, std::string& error) {
  for (size_t slash = path.find('/', 1);; slash = path.find('/', slash + 1)) {
    const std::string prefix = path.substr(0, slash);
    if (::mkdir(prefix.c_str(), 0755) == 0) {
      ::chmod(prefix.c_str(), 0755);
    } else if (errno != EEXIST) {
      error = "cannot create " + prefix + ": " + std::generic_category().message(errno);
      return false;
    }
    if (slash == std::string::npos) return true;
  }
}

}  // namespace bpfprof
