// Session control for `bpfprof record`: sets up sampling and BPF, launches the command,
// collects events until it ends, then builds and writes the profile.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace bpfprof {

struct RecordOptions {
  uint32_t frequency_hz = 1000;
  std::string output_path = "profile.json.gz";
  std::optional<double> duration_seconds;
  std::vector<std::string> command;
};

// Returns the process exit status for bpfprof: the command's status when it ran, 2 for
// errors before recording started.
int run_record(const RecordOptions& options);

}  // namespace bpfprof
