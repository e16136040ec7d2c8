#include "userspace/session/periodic_driver.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "userspace/model/clocks.h"
#include "userspace/output/profile_writer.h"
#include "userspace/session/freed_memory.h"
#include "userspace/session/signals.h"

namespace bpfprof {

namespace {

// How long the end waits for profiles still queued or under way.
constexpr double kUploadWaitSeconds = 5;

// The wall clock at t, ms since the epoch.
double wall_clock_ms_at(const Recording& recording, MonotonicNs t) {
  return recording.start_wall_clock_ms + ms_between(recording.start_time, t);
}

std::unique_ptr<Uploader> uploader_for(const RecordOptions& options) {
  if (options.upload_url.empty()) return nullptr;
  Uploader::Options upload;
  upload.url = options.upload_url;
  upload.sample_rate_hz = options.frequency_hz;
  return std::make_unique<Uploader>(upload);
}

}  // namespace

PeriodicOutputDriver::PeriodicOutputDriver(const RecordOptions& options, IngestPipeline& pipeline,
                                           Recording& recording,
                                           std::optional<RunAsUser> invoking_user)
    : options_(options),
      pipeline_(pipeline),
      recording_(recording),
      invoking_user_(std::move(invoking_user)),
      show_status_(isatty(STDERR_FILENO) == 1) {
  if (options_.switch_output_seconds) rotated_.emplace(options_.switch_output_files);
  if (options_.switch_output_seconds || options_.flight_recorder_seconds) period_writer_.emplace();
  // The window's top wakers are those of the waits woken in the window.
  if (options_.flight_recorder_seconds) pipeline_.model().keep_wakers_by_second();
  uploader_ = uploader_for(options_);
}

bool PeriodicOutputDriver::active() const {
  return options_.flight_recorder_seconds || options_.switch_output_seconds || uploader_;
}

void PeriodicOutputDriver::begin(MonotonicNs start) { period_start_ = start; }

// Where a kept window of `seconds` begins when the samples reach `until`.
MonotonicNs PeriodicOutputDriver::window_start(MonotonicNs until, double seconds) const {
  const auto keep = static_cast<uint64_t>(seconds * 1e9);
  return MonotonicNs{
      std::max(recording_.start_time.value, until.value > keep ? until.value - keep : 0)};
}

// --switch-output: once a period is in the model (which holds what is older than the reorder
// window), its samples become one file and leave memory. --flight-recorder: samples older
// than the last DURATION leave memory; SIGUSR2 writes what is left.
void PeriodicOutputDriver::advance(MonotonicNs now) {
  if (now.value < recording_.start_time.value + IngestPipeline::kReorderWindowNs) return;
  const MonotonicNs in_model{now.value - IngestPipeline::kReorderWindowNs};
  if (options_.flight_recorder_seconds) {
    slide_flight_recorder(now, in_model);
    return;
  }
  if (options_.switch_output_seconds &&
      in_model.value >=
          period_start_.value + static_cast<uint64_t>(*options_.switch_output_seconds * 1e9))
    rotate_period(in_model);
}

void PeriodicOutputDriver::slide_flight_recorder(MonotonicNs now, MonotonicNs in_model) {
  const MonotonicNs from = window_start(in_model, *options_.flight_recorder_seconds);
  const bool dump = take_dump_request();
  if (dump || now >= next_period_check_) {
    pipeline_.model().drop_samples_before(from);
    pipeline_.model().forget_ended_before(from);
    next_period_check_ = MonotonicNs{now.value + 1'000'000'000};
  }
  // Once per DURATION: the stacks of the samples forgotten go too.
  if (now >= next_compaction_) {
    pipeline_.compact_stacks();
    release_freed_memory();
    next_compaction_ =
        MonotonicNs{now.value + static_cast<uint64_t>(*options_.flight_recorder_seconds * 1e9)};
  }
  if (dump) write_period(from, in_model);
}

void PeriodicOutputDriver::rotate_period(MonotonicNs in_model) {
  write_period(period_start_, in_model);
  pipeline_.model().drop_samples_before(MonotonicNs{UINT64_MAX});  // written, or lost with a note
  pipeline_.model().forget_ended_before(in_model);
  pipeline_.model().clear_waker_totals();
  pipeline_.compact_stacks();
  release_freed_memory();
  period_start_ = in_model;
}

void PeriodicOutputDriver::say_unused_dump_request() const {
  if (!options_.flight_recorder_seconds && take_dump_request())
    fputs("bpfprof: SIGUSR2 ignored: it writes a profile with --flight-recorder only\n", stderr);
}

// The period [start, end) of the model's samples goes to the background writer as a
// snapshot (the model with its samples, the recording's metadata); the recording goes on.
void PeriodicOutputDriver::write_period(MonotonicNs start, MonotonicNs end) {
  auto period = std::make_shared<Snapshot>(
      Snapshot{pipeline_.model(), copy_without_pending(recording_), start, end});
  if (period_writer_->submit([this, period] { write_snapshot(*period); }))
    fputs("bpfprof: the recording waited for the profile of a period before to be written\n",
          stderr);
}

// On the background writer's thread. It reads options_ and invoking_user_, which do not
// change, and is the only user of rotated_ until it is finished. An error is said in one
// line and the recording goes on.
void PeriodicOutputDriver::write_snapshot(Snapshot& period) {
  const std::string path =
      period_file_name(options_.output_path, wall_clock_ms_at(period.recording, period.start));
  const double seconds = ms_between(period.start, period.end) / 1e3;
  // Names the code of this period only: a symbolizer kept for every period would hold
  // everything a long -a run ever met, and its memory would grow with time.
  SystemSymbolizer symbolizer(SymbolizerOptions{options_.symbol_dirs});
  if (show_status_) fputs("\r\033[K", stderr);
  try {
    PeriodWindow window(period.recording, period.start, period.end);
    std::unique_ptr<CommittableSink> sink = open_output(path);
    write_profile_with_report(period.model, period.recording, *sink,
                              ProfileOptions{options_.keep_idle_threads, options_.symbol_dirs,
                                             options_.format, options_.embed_sources},
                              symbolizer);
    sink->commit();
  } catch (const std::exception& e) {
    fprintf(stderr, "bpfprof: cannot write the profile of %.1f s (its samples are lost): %s\n",
            seconds, e.what());
    return;
  }
  give_to_user(path, invoking_user_);
  fprintf(stderr, "bpfprof: wrote %s (%.1f s)\n", path.c_str(), seconds);
  say_removed(path);
  upload(period.model, period.recording, period.start, period.end, symbolizer);
}

// --switch-output-files: `path` is written; the oldest files beyond the number kept go.
void PeriodicOutputDriver::say_removed(const std::string& path) {
  if (!rotated_) return;
  for (const std::string& gone : rotated_->written(path))
    fprintf(stderr, "bpfprof: removed %s (--switch-output-files)\n", gone.c_str());
}

// --upload: the period [start, end) as pprof, queued for the uploader's thread.
void PeriodicOutputDriver::upload(const SessionModel& model, Recording& recording,
                                  MonotonicNs start, MonotonicNs end,
                                  ProfileSymbolizer& symbolizer) {
  if (!uploader_) return;
  const double from_s = wall_clock_ms_at(recording, start) / 1e3;
  const double until_s = wall_clock_ms_at(recording, end) / 1e3;
  try {
    PeriodWindow window(recording, start, end);
    StringSink pprof;
    write_profile_with_report(
        model, recording, pprof,
        ProfileOptions{options_.keep_idle_threads, options_.symbol_dirs, OutputFormat::kPprof},
        symbolizer);
    uploader_->submit(pprof.take(), from_s, until_s);
  } catch (const std::exception& e) {
    fprintf(stderr, "bpfprof: cannot make the profile to upload: %s\n", e.what());
  }
}

// --flight-recorder writes the last DURATION to the output file; --switch-output the last
// period to a file of its own name (the output file stays unused).
void PeriodicOutputDriver::write_waiting_periods() {
  if (period_writer_) period_writer_->finish();
}

std::optional<MonotonicNs> PeriodicOutputDriver::last_period(OutputWriter& output) {
  if (options_.flight_recorder_seconds) {
    final_period_start_ = window_start(recording_.end_time, *options_.flight_recorder_seconds);
    pipeline_.model().drop_samples_before(*final_period_start_);
  } else if (options_.switch_output_seconds) {
    final_period_start_ = period_start_;
    output.move_to(period_file_name(output.path(), wall_clock_ms_at(recording_, period_start_)));
  }
  return final_period_start_;
}

void PeriodicOutputDriver::last_profile_written(const std::string& path) { say_removed(path); }

void PeriodicOutputDriver::finish_uploads() {
  if (!uploader_) return;
  SystemSymbolizer symbolizer(SymbolizerOptions{options_.symbol_dirs});
  upload(pipeline_.model(), recording_, final_period_start_.value_or(recording_.start_time),
         recording_.end_time, symbolizer);
  const Uploader::Counts counts = uploader_->finish(kUploadWaitSeconds);
  fprintf(stderr, "bpfprof: uploaded %llu profiles to %s",
          static_cast<unsigned long long>(counts.sent), options_.upload_url.c_str());
  if (counts.failed + counts.dropped > 0)
    fprintf(stderr, "; %llu failed, %llu dropped (last error: %s)",
            static_cast<unsigned long long>(counts.failed),
            static_cast<unsigned long long>(counts.dropped), counts.last_error.c_str());
  fputc('\n', stderr);
}

}  // namespace bpfprof
