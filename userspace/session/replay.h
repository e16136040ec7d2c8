// `bpfprof replay EVENTS`: runs a saved event log (record --save-events) through the same
// userspace path as a live recording (decode, DWARF unwinding, session model, symbolization,
// writer) and reports how fast each stage went.
#pragma once

#include <string>
#include <vector>

namespace bpfprof {

struct ReplayOptions {
  std::string events_path;
  std::string output_path = "replay.json.gz";
  std::vector<std::string> symbol_dirs;
  bool keep_idle_threads = false;
  bool no_collapse = false;
};

// Returns 0, or 2 with a one-line message when the log cannot be read or the output written.
int run_replay(const ReplayOptions& options);

}  // namespace bpfprof
