// Whole-file reads that also work for /proc files, whose st_size is 0.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace bpfprof {

// The file's full contents, or nullopt if it cannot be opened or read.
std::optional<std::string> read_entire_file(const std::string& path);

// A regular file's contents when it has at most `max_bytes` (nullopt: not a regular file,
// larger, or unreadable). Never blocks on a FIFO or device named like a file.
std::optional<std::string> read_regular_file(const std::string& path, uint64_t max_bytes);

}  // namespace bpfprof
