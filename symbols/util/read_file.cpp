#include "symbols/util/read_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <memory>

#include "symbols/util/unique_handle.h"

namespace bpfprof {

std::optional<std::string> read_entire_file(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return std::nullopt;

  // Read until EOF rather than trusting st_size: procfs reports 0 for maps and kallsyms.
  // Large reads matter for procfs: each read() call regenerates a seq_file batch.
  constexpr size_t kChunkSize = 256 * 1024;
  const auto chunk = std::make_unique_for_overwrite<char[]>(kChunkSize);
  std::string contents;
  for (;;) {
    const ssize_t got = ::read(fd.get(), chunk.get(), kChunkSize);
    if (got < 0) {
      if (errno == EINTR) continue;
      return std::nullopt;
    }
    if (got == 0) return contents;
    contents.append(chunk.get(), static_cast<size_t>(got));
  }
}

std::optional<std::string> read_regular_file(const std::string& path, uint64_t max_bytes) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  struct stat st {};
  if (!fd || fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode) ||
      static_cast<uint64_t>(st.st_size) > max_bytes)
    return std::nullopt;
  std::string contents(static_cast<size_t>(st.st_size), '\0');
  size_t done = 0;
  while (done < contents.size()) {
    const ssize_t got =
        pread(fd.get(), contents.data() + done, contents.size() - done, static_cast<off_t>(done));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;  // shortened meanwhile: what is there
    done += static_cast<size_t>(got);
  }
  contents.resize(done);
  return contents;
}

}  // namespace bpfprof
