// Whole-file reads that also work for /proc files, whose st_size is 0: for the kernel's own
// files (a file a user may control is opened through untrusted_file.h); and reads at an offset
// of a file already open, through short reads and interruptions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace bpfprof {

// The file's full contents, or nullopt if it cannot be opened or read.
std::optional<std::string> read_entire_file(const std::string& path);

// Up to `size` bytes of the file open as `fd` from `offset` into `out`: how many were read
// (fewer at the file's end or on an error).
size_t pread_up_to(int fd, void* out, size_t size, uint64_t offset);
// Exactly `size` bytes of the file open as `fd` from `offset`; false when fewer could be read.
bool pread_exact(int fd, void* out, size_t size, uint64_t offset);

}  // namespace bpfprof
