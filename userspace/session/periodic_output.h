// Profiles written while a recording goes on: --switch-output (a complete profile every
// period, each sample in exactly one file, the oldest files removed beyond
// --switch-output-files) and --flight-recorder (only the last DURATION kept, written on
// SIGUSR2 and at the end). The recorder decides when; these are the pieces it needs.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

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

// Runs jobs (the writing of a period's profile) one after the other on a thread of its own,
// so that the recording loop goes on reading the ring buffers meanwhile: writing a minute
// of -a takes seconds, long enough for an unread ring buffer to fill and lose events. At most
// `max_waiting` jobs wait besides the one running; a submit beyond that waits for a place (each job
// holds a period's snapshot: memory stays bounded).
class BackgroundWriter {
 public:
  explicit BackgroundWriter(size_t max_waiting = 1);
  ~BackgroundWriter();  // runs what is queued first
  BackgroundWriter(const BackgroundWriter&) = delete;
  BackgroundWriter& operator=(const BackgroundWriter&) = delete;

  // Returns whether it had to wait for a place.
  bool submit(std::function<void()> job);
  // Runs what is queued; the thread ends. Submitting afterwards runs the job at once, here.
  void finish();

 private:
  void run();

  const size_t max_waiting_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::function<void()>> jobs_;
  bool finishing_ = false;
  std::thread thread_;  // last: started once the rest is ready
};

}  // namespace bpfprof
