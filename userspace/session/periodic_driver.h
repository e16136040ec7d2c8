// What a recording writes while it goes on, and what it uploads: --switch-output's periods
// (each a file of its own, the oldest removed), --flight-recorder's window (samples older
// than it forgotten, the window written on SIGUSR2), and with --upload each profile also
// pushed as pprof. The collect loop says how far the rings are read; the end of the
// recording asks where the last profile begins.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "userspace/capture/ingest.h"
#include "userspace/model/recording.h"
#include "userspace/output/profile_symbolizer.h"
#include "userspace/session/launcher.h"
#include "userspace/session/output_writer.h"
#include "userspace/session/periodic_output.h"
#include "userspace/session/recorder.h"
#include "userspace/session/uploader.h"

namespace bpfprof {

class PeriodicOutputDriver {
 public:
  // `pipeline` and `recording` are the collect loop's and outlive the driver.
  PeriodicOutputDriver(const RecordOptions& options, IngestPipeline& pipeline, Recording& recording,
                       std::optional<RunAsUser> invoking_user);
  PeriodicOutputDriver(const PeriodicOutputDriver&) = delete;
  PeriodicOutputDriver& operator=(const PeriodicOutputDriver&) = delete;

  // Whether anything is written or uploaded before the end (the rings are then read at the
  // usual pace, never the quiet one).
  bool active() const;
  // Time zero: the first period begins.
  void begin(MonotonicNs start);
  // The rings are read up to `now`: a complete period is written, the flight recorder's
  // window slides (and is written on SIGUSR2).
  void advance(MonotonicNs now);
  // A SIGUSR2 without --flight-recorder is said to do nothing.
  void say_unused_dump_request() const;

  // At the end, before the pipeline's last events: the periods' profiles still waiting are
  // written (the periods before come first).
  void write_waiting_periods();
  // Then, with every event in the model: where the last profile begins (nullopt: the whole
  // recording). --switch-output's last period goes to a file of its own name, not `output`'s.
  std::optional<MonotonicNs> last_period(OutputWriter& output);
  // The last profile was written to the output file at `path`: it counts among the files
  // --switch-output-files keeps.
  void last_profile_written(const std::string& path);
  // --upload: the last profile goes too; the end waits a few seconds at most for the backend.
  void finish_uploads();

 private:
  // A period's profile, written on the background writer's thread: the model as it was (with
  // the period's samples) and the recording's metadata, copied when the period ended.
  struct Snapshot {
    SessionModel model;
    Recording recording;
    MonotonicNs start;
    MonotonicNs end;
  };

  MonotonicNs window_start(MonotonicNs until, double seconds) const;
  void slide_flight_recorder(MonotonicNs now, MonotonicNs in_model);
  void rotate_period(MonotonicNs in_model);
  void write_period(MonotonicNs start, MonotonicNs end);
  void write_snapshot(Snapshot& period);
  void say_removed(const std::string& path);
  void upload(const SessionModel& model, Recording& recording, MonotonicNs start, MonotonicNs end,
              ProfileSymbolizer& symbolizer);

  const RecordOptions& options_;
  IngestPipeline& pipeline_;
  Recording& recording_;
  const std::optional<RunAsUser> invoking_user_;
  // A terminal's status line is cleared before a period's line.
  const bool show_status_;
  std::optional<RotatedFiles> rotated_;  // --switch-output: the files written so far
  MonotonicNs period_start_{0};          // where the current period began
  MonotonicNs next_period_check_{0};     // --flight-recorder: when to forget old samples next
  MonotonicNs next_compaction_{0};       // --flight-recorder: of the stack trees
  std::optional<MonotonicNs> final_period_start_;  // the profile at the end covers from there
  std::unique_ptr<Uploader> uploader_;             // --upload
  // Writes the periods' profiles from snapshots while the recording goes on. Last: its thread
  // uses the members above until it is joined.
  std::optional<BackgroundWriter> period_writer_;
};

}  // namespace bpfprof
