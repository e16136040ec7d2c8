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

}  // namespace

int run_replay(const ReplayOptions& options) {
  try {
    EventLogReader reader(options.events_path);
    const RecordingSettings& settings = reader.settings();
    Recording recording;
    recording.frequency_hz = settings.frequency_hz;
    recording.sampling_event = settings.sampling_event;
    recording.off_cpu = settings.off_cpu;
    recording.call_graph = settings.call_graph;
    recording.start_time = settings.start_time;
    recording.end_time = settings.start_time;
    recording.start_wall_clock_ms = settings.start_wall_clock_ms;
    IngestPipeline pipeline(recording, settings.call_graph != "fp", !options.no_collapse);
    uint64_t bpf_events = 0;
    uint64_t lifecycle_events = 0;
    MonotonicNs latest = recording.start_time;  // the latest event time seen
    bool complete = false;
    std::unique_ptr<CommittableSink> output = open_output(options.output_path);
    const double cpu_start = thread_cpu_ms();
    while (std::optional<EventLogReader::Record> record = reader.next()) {
      switch (record->type) {
        case EventLogReader::Record::Type::kBpfEvent:
          pipeline.take_bpf_event(record->data, record->size);
          // A batch as a live recording's poll would have it.
          if (++bpf_events % kEventsPerBatch == 0 && !recording.samples.empty()) {
            latest = std::max(latest, recording.samples.back().time);
            pipeline.advance(latest);
          }
          break;
        case EventLogReader::Record::Type::kLifecycle:
          recording.events.push_back(std::move(*record->lifecycle));
          pipeline.take_lifecycle_events();
          ++lifecycle_events;
          break;
        case EventLogReader::Record::Type::kTrailer:
          recording.end_time = record->trailer.end_time;
          recording.stats.lost_bpf_events = record->trailer.lost_bpf_events;
          recording.stats.lost_sideband_records = record->trailer.lost_sideband_records;
          complete = true;
          break;
      }
    }
    if (!complete) {
      fprintf(stderr,
              "bpfprof: %s ends early (the recording was cut short); replaying what it holds\n",
              options.events_path.c_str());
      for (const SampleRecord& s : recording.samples)
        recording.end_time = std::max(recording.end_time, s.time);
    }
    pipeline.finish(recording.end_time);
    const double cpu_modelled = thread_cpu_ms();
    const double model_ms = pipeline.model_cpu_ms();
    const SessionModel& model = pipeline.model();
    ProfileSummary summary = write_profile(
        model, recording, *output, ProfileOptions{options.keep_idle_threads, options.symbol_dirs});
    output->commit();
    const double cpu_written = thread_cpu_ms();

    rusage usage{};
    getrusage(RUSAGE_SELF, &usage);
    const uint64_t events = bpf_events + lifecycle_events;
    const double total_ms = cpu_written - cpu_start;
    fprintf(
        stderr,
        "bpfprof: replayed %llu events (%llu samples, %llu switch-outs, %s stacks) in %.0f ms CPU: "
        "%.0f events/s; decode+unwind %.0f ms, model %.0f ms, symbolize+write %.0f ms; "
        "%zu unique stacks, %zu samples written, peak RSS %.1f MB\n",
        static_cast<unsigned long long>(events),
        static_cast<unsigned long long>(recording.stats.samples),
        static_cast<unsigned long long>(recording.stats.switch_outs), settings.call_graph.c_str(),
        total_ms, static_cast<double>(events) / (total_ms / 1e3),
        cpu_modelled - cpu_start - model_ms, model_ms, cpu_written - cpu_modelled,
        model.stacks().size(), summary.samples, static_cast<double>(usage.ru_maxrss) / 1024.0);
    return 0;
  } catch (const std::exception& e) {
    fprintf(stderr, "bpfprof: %s\n", e.what());
    return 2;
  }
}

}  // namespace bpfprof
