#include "symbols/util/read_file.h"

#include <fcntl.h>
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

size_t pread_up_to(int fd, void* out, size_t size, uint64_t offset) {
  auto* bytes = static_cast<char*>(out);
  size_t done = 0;
  while (done < size) {
    const ssize_t got = ::pread(fd, bytes + done, size - done, static_cast<off_t>(offset + done));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    done += static_cast<size_t>(got);
  }
  return done;
}

bool pread_exact(int fd, void* out, size_t size, uint64_t offset) {
  return pread_up_to(fd, out, size, offset) == size;
}

}  // namespace bpfprof
