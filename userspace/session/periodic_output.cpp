#include "userspace/session/periodic_output.h"

#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <exception>

#include "userspace/model/clocks.h"

namespace bpfprof {

std::string period_file_name(const std::string& output_path, double wall_clock_ms) {
  const size_t slash = output_path.rfind('/');
  const size_t name_start = slash == std::string::npos ? 0 : slash + 1;
  size_t dot = output_path.find('.', name_start + 1);  // a leading dot is part of the name
  if (dot == std::string::npos) dot = output_path.size();
  const time_t seconds = static_cast<time_t>(std::floor(wall_clock_ms / 1000.0));
  tm utc{};
  gmtime_r(&seconds, &utc);
  char stamp[32];
  strftime(stamp, sizeof stamp, ".%Y%m%dT%H%M%SZ", &utc);
  const std::string stem = output_path.substr(0, dot) + stamp;
  const std::string extension = output_path.substr(dot);
  std::string path = stem + extension;
  struct stat existing {};
  for (int n = 2; stat(path.c_str(), &existing) == 0; ++n)
    path = stem + "-" + std::to_string(n) + extension;
  return path;
}

PeriodWindow::PeriodWindow(Recording& recording, MonotonicNs start, MonotonicNs end)
    : recording_(recording),
      start_(recording.start_time),
      end_(recording.end_time),
      wall_clock_ms_(recording.start_wall_clock_ms) {
  recording.start_wall_clock_ms += ms_between(recording.start_time, start);
  recording.start_time = start;
  recording.end_time = end;
  losses_ = recording.losses;
  std::erase_if(recording.losses,
                [&](const LossRecord& loss) { return loss.time < start || loss.time >= end; });
}

PeriodWindow::~PeriodWindow() {
  recording_.start_time = start_;
  recording_.end_time = end_;
  recording_.start_wall_clock_ms = wall_clock_ms_;
  recording_.losses = std::move(losses_);
}

std::vector<std::string> RotatedFiles::written(const std::string& path) {
  paths_.push_back(path);
  std::vector<std::string> removed;
  while (keep_ > 0 && paths_.size() > keep_) {
    if (unlink(paths_.front().c_str()) == 0) removed.push_back(paths_.front());
    paths_.pop_front();
  }
  return removed;
}

BackgroundWriter::BackgroundWriter(size_t max_waiting)
    : max_waiting_(max_waiting), thread_([this] { run(); }) {}

BackgroundWriter::~BackgroundWriter() { finish(); }

bool BackgroundWriter::submit(std::function<void()> job) {
  std::unique_lock lock(mutex_);
  if (finishing_) {
    lock.unlock();
    job();
    return false;
  }
  const bool waited = jobs_.size() > max_waiting_;
  changed_.wait(lock, [&] { return jobs_.size() <= max_waiting_; });
  jobs_.push_back(std::move(job));
  changed_.notify_all();
  return waited;
}

void BackgroundWriter::finish() {
  {
    std::lock_guard lock(mutex_);
    finishing_ = true;
  }
  changed_.notify_all();
  if (thread_.joinable()) thread_.join();
}

// The job at the front stays queued while it runs: it counts against max_waiting_ + 1.
void BackgroundWriter::run() {
  std::unique_lock lock(mutex_);
  for (;;) {
    changed_.wait(lock, [&] { return finishing_ || !jobs_.empty(); });
    if (jobs_.empty()) return;  // finishing, nothing left
    std::function<void()> job = std::move(jobs_.front());
    lock.unlock();
    try {
      job();
    } catch (const std::exception& e) {
      fprintf(stderr, "bpfprof: writing a period failed: %s\n", e.what());
    }
    lock.lock();
    jobs_.pop_front();
    changed_.notify_all();
  }
}

}  // namespace bpfprof
