#include "userspace/session/replay.h"

#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <stdexcept>

#include "symbols/dwarf/unwinder.h"
#include "userspace/capture/event_log.h"
#include "userspace/capture/ingest.h"
#include "userspace/model/clocks.h"
#include "userspace/model/session_model.h"
#include "userspace/output/output_file.h"
#include "userspace/output/profile_writer.h"

namespace bpfprof {

namespace {

// A live recording reads its ring buffer every 50 ms; a replay makes batches of this many
// events (the model and the unwinder's forgetting work per batch).
constexpr uint64_t kEventsPerBatch = 4096;

Recording recording_for(const RecordingSettings& settings) {
  Recording recording;
  recording.frequency_hz = settings.frequency_hz;
  recording.sampling_event = settings.sampling_event;
  recording.off_cpu = settings.off_cpu;
  recording.call_graph = settings.call_graph;
  recording.start_time = settings.start_time;
  recording.end_time = settings.start_time;
  recording.start_wall_clock_ms = settings.start_wall_clock_ms;
  return recording;
}

struct ReplayedEvents {
  uint64_t bpf_events = 0;
  uint64_t lifecycle_events = 0;
  bool complete = false;  // the stream had its trailer
};

// Feeds every record of the stream through the pipeline, in batches as a live recording's
// polls would make them.
ReplayedEvents replay_events(EventLogReader& reader, IngestPipeline& pipeline) {
  Recording& recording = pipeline.recording();
  ReplayedEvents counts;
  MonotonicNs latest = recording.start_time;  // the latest event time seen
  while (std::optional<EventLogReader::Record> record = reader.next()) {
    switch (record->type) {
      case EventLogReader::Record::Type::kBpfEvent:
        pipeline.take_bpf_event(record->data, record->size);
        if (++counts.bpf_events % kEventsPerBatch == 0 && !recording.samples.empty()) {
          latest = std::max(latest, recording.samples.back().time);
          pipeline.advance(latest);
        }
        break;
      case EventLogReader::Record::Type::kLifecycle:
        recording.events.push_back(std::move(*record->lifecycle));
        pipeline.take_lifecycle_events();
        ++counts.lifecycle_events;
        break;
      case EventLogReader::Record::Type::kTrailer:
        recording.end_time = record->trailer.end_time;
        recording.stats.lost_bpf_events = record->trailer.lost_bpf_events;
        recording.stats.lost_sideband_records = record->trailer.lost_sideband_records;
        counts.complete = true;
        break;
    }
  }
  return counts;
}

// CPU time of each stage, in ms of this thread.
struct ReplayTimes {
  double ingest = 0;  // decode + unwind + model
  double model = 0;
  double write = 0;  // symbolize + write
};

void print_replay_report(const Recording& recording, const ReplayedEvents& counts,
                         const ReplayTimes& times, size_t unique_stacks, size_t samples_written) {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  const uint64_t events = counts.bpf_events + counts.lifecycle_events;
  const double total_ms = times.ingest + times.write;
  fprintf(
      stderr,
      "bpfprof: replayed %llu events (%llu samples, %llu switch-outs, %s stacks) in %.0f ms CPU: "
      "%.0f events/s; decode+unwind %.0f ms, model %.0f ms, symbolize+write %.0f ms; "
      "%zu unique stacks, %zu samples written, peak RSS %.1f MB\n",
      static_cast<unsigned long long>(events),
      static_cast<unsigned long long>(recording.stats.samples),
      static_cast<unsigned long long>(recording.stats.switch_outs), recording.call_graph.c_str(),
      total_ms, static_cast<double>(events) / (total_ms / 1e3), times.ingest - times.model,
      times.model, times.write, unique_stacks, samples_written,
      static_cast<double>(usage.ru_maxrss) / 1024.0);
}

}  // namespace

int run_replay(const ReplayOptions& options) {
  try {
    EventLogReader reader(options.events_path);
    Recording recording = recording_for(reader.settings());
    IngestPipeline pipeline(recording, {.dwarf = recording.call_graph != "fp",  // dwarf, dwarf-copy
                                        .collapse_repeated_samples = !options.no_collapse,
                                        .pin_mapped_files = false,
                                        .python_frames = false});
    std::unique_ptr<CommittableSink> output = open_output(options.output_path);
    const double cpu_start = thread_cpu_ms();
    const ReplayedEvents counts = replay_events(reader, pipeline);
    if (!counts.complete) {
      fprintf(stderr,
              "bpfprof: %s ends early (the recording was cut short); replaying what it holds\n",
              options.events_path.c_str());
      for (const SampleRecord& s : recording.samples)
        recording.end_time = std::max(recording.end_time, s.time);
    }
    pipeline.finish(recording.end_time);
    const double cpu_modelled = thread_cpu_ms();
    ProfileSummary summary =
        write_profile(pipeline.model(), recording, *output,
                      ProfileOptions{options.keep_idle_threads, options.symbol_dirs});
    output->commit();
    print_replay_report(recording, counts,
                        ReplayTimes{cpu_modelled - cpu_start, pipeline.model_cpu_ms(),
                                    thread_cpu_ms() - cpu_modelled},
                        pipeline.model().stacks().size(), summary.samples);
    return 0;
  } catch (const std::exception& e) {
    fprintf(stderr, "bpfprof: %s\n", e.what());
    return 2;
  }
}

}  // namespace bpfprof
