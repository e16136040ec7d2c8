// The signals that stop a recording (SIGINT, SIGTERM, SIGHUP, SIGQUIT), counted by a handler
// that does only async-signal-safe work, and the protection of a profile being written: a
// stop signal then does not lose what was recorded, unless it is the third one.
#pragma once

#include <string>

namespace bpfprof {

// Installs the handler (no SA_RESTART: a poll returns early with EINTR).
void install_stop_signal_handlers();

struct StopSignals {
  int count = 0;                // stop signals received so far
  int last = 0;                 // the latest one
  bool from_a_process = false;  // it was sent with kill(), not by the terminal
};
StopSignals stop_signals();

// SIGUSR2 asks a flight recorder (--flight-recorder) to write what it holds; the handler
// only counts. Installed with the stop signals' handlers, flight recorder or not.
void install_dump_signal_handler();
// Whether SIGUSR2 came since the last call.
bool take_dump_request();

// While one lives, the profile is being written to `temp_path`: a stop signal says so and is
// otherwise ignored; a third one removes the temporary file and exits.
class WritingProfile {
 public:
  explicit WritingProfile(const std::string& temp_path);
  ~WritingProfile();
  // The profile is now written to another temporary file (a fallback place).
  void now_writing(const std::string& temp_path);
  WritingProfile(const WritingProfile&) = delete;
  WritingProfile& operator=(const WritingProfile&) = delete;
};

}  // namespace bpfprof
