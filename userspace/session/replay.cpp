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

// A live recording reads its ring buffer every 100 ms; a replay makes batches of this many
// events (the model and the unwinder's forgetting work per batch).
constexpr uint64_t kEventsPerBatch = 4096;

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
      static_cast<unsigned long long>(recording.stats.switch_outs),
      call_graph_name(recording.call_graph), total_ms,
      static_cast<double>(events) / (total_ms / 1e3), times.ingest - times.model, times.model,
      times.write, unique_stacks, samples_written, static_cast<double>(usage.ru_maxrss) / 1024.0);
}

}  // namespace

int run_replay(const ReplayOptions& options) {
  try {
    EventLogReader reader(options.events_path);
    Recording recording = recording_for(reader.settings());
    IngestPipeline pipeline(recording, {.dwarf = uses_dwarf(recording.call_graph),
                                        .collapse_repeated_samples = !options.no_collapse,
                                        .live_processes = false,
                                        .time_model = true});
    std::unique_ptr<CommittableSink> output = open_output(options.output_path);
    const double cpu_start = thread_cpu_ms();
    const ReplayedEvents counts = replay_events(reader, pipeline, kEventsPerBatch);
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
