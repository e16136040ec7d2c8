// Profiles written while a recording goes on: --switch-output (a complete profile every
// period, each sample in exactly one file, the oldest files removed beyond
// --switch-output-files) and --flight-recorder (only the last DURATION kept, written on
// SIGUSR2 and at the end). The recorder decides when; these are the pieces it needs.
#pragma once

#include <cstddef>
#include <deque>
#include <string>

#include "userspace/model/recording.h"

namespace bpfprof {

// NAME.YYYYmmddTHHMMSSZ.EXT for `output_path` NAME.EXT (EXT from the first dot of the file
// name on: .json.gz, .pb.gz, .folded), at the wall clock `wall_clock_ms` (UTC). A name that
// already exists gets -2, -3, ... after the time.
std::string period_file_name(const std::string& output_path, double wall_clock_ms);

// The recording seen as the period [start, end) while a profile of it is written: its time
// zero, end and wall clock moved there, and only the losses noticed in the period; all
// restored when the window goes.
class PeriodWindow {
 public:
  PeriodWindow(Recording& recording, MonotonicNs start, MonotonicNs end);
  ~PeriodWindow();
  PeriodWindow(const PeriodWindow&) = delete;
  PeriodWindow& operator=(const PeriodWindow&) = delete;

 private:
  Recording& recording_;
  const MonotonicNs start_;
  const MonotonicNs end_;
  const double wall_clock_ms_;
  std::vector<LossRecord> losses_;
};

// The files written so far; the oldest are removed when there are more than `keep` (0: all).
class RotatedFiles {
 public:
  explicit RotatedFiles(size_t keep) : keep_(keep) {}
  // Returns the files removed.
  std::vector<std::string> written(const std::string& path);

 private:
  size_t keep_;
  std::deque<std::string> paths_;
};

}  // namespace bpfprof
