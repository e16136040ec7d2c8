// Whole-file reads that also work for /proc files, whose st_size is 0.
#pragma once

#include <optional>
#include <string>

namespace bpfprof {

// The file's full contents, or nullopt if it cannot be opened or read.
std::optional<std::string> read_entire_file(const std::string& path);

}  // namespace bpfprof
