// Whole-file reads that also work for /proc files, whose st_size is 0: for the kernel's own
// files. A file a user may control is read through untrusted_file.h.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace bpfprof {

// The file's full contents, or nullopt if it cannot be opened or read.
std::optional<std::string> read_entire_file(const std::string& path);

}  // namespace bpfprof
