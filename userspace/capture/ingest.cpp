#include "userspace/capture/ingest.h"

#include <algorithm>
#include <cstring>

#include "bpf/events.h"
#include "symbols/dwarf/unwinder.h"
#include "userspace/capture/event_log.h"
#include "userspace/capture/process_contexts.h"
#include "userspace/model/clocks.h"

namespace bpfprof {
namespace {

std::set<RuntimeKind> disabled_runtimes(const IngestPipeline::Options& options) {
  return options.runtime_frames ? options.runtimes_not_read : all_runtimes();
}

}  // namespace

IngestPipeline::IngestPipeline(Recording& recording, const Options& options)
    : recording_(recording),
      unwinder_(options.dwarf ? std::make_unique<DwarfUnwinder>() : nullptr),
      runtimes_(disabled_runtimes(options)),
      decoder_(unwinder_.get()),
      live_processes_(options.live_processes),
      time_model_(options.time_model) {
  model_.configure_for(recording_);
  model_.set_collapse_repeated_samples(options.collapse_repeated_samples);
  if (!runtimes_.empty()) decoder_.set_runtimes(&runtimes_);
}

IngestPipeline::~IngestPipeline() = default;

template <typename Work>
void IngestPipeline::timed(Work&& work) {
  if (!time_model_) return work();
  const double before = thread_cpu_ms();
  work();
  model_cpu_ms_ += thread_cpu_ms() - before;
}

void IngestPipeline::take_lifecycle_events() {
  std::vector<LifecycleEvent>& events = recording_.events;
  if (resolved_events_ >= events.size()) return;
  if (live_processes_) {
    mapped_files_.resolve(events, resolved_events_);
    append_process_contexts(events, resolved_events_);
  }
  decoder_.queue_address_space_changes(events, resolved_events_);
  runtimes_.observe(events, resolved_events_, recording_);
  if (observer_) observer_(events, resolved_events_);
  resolved_events_ = events.size();
}

void IngestPipeline::take_bpf_event(const void* data, size_t size) {
  read_lifecycle_up_to(data, size);
  decoder_.decode(data, size, recording_);
  // Forks, execs and exits the decoder appended: before anything can reorder them.
  take_lifecycle_events();
}

void IngestPipeline::read_lifecycle_up_to(const void* data, size_t size) {
  if (!read_lifecycle_ || !EventDecoder::unwinds_in_userspace(data, size)) return;
  bpfprof_event_header header;
  memcpy(&header, data, sizeof(header));  // a saved stream's records lie at any offset
  if (header.timestamp_ns < lifecycle_read_until_.value) return;
  read_lifecycle_();
  take_lifecycle_events();
}

void IngestPipeline::advance(MonotonicNs now) {
  consume_into_model(MonotonicNs{now.value - std::min(now.value, kReorderWindowNs)});
  decoder_.forget_exited_processes(now);
  runtimes_.forget_exited();
  compact_raw_stacks_if_grown();
}

// Amortized: each compaction copies what is in use, at most half of the tree by then.
void IngestPipeline::compact_raw_stacks_if_grown() {
  if (recording_.raw_stacks.size() < 2 * raw_stacks_kept_ + kRawStackSlack) return;
  timed([&] {
    model_.compact_raw_stacks(recording_, [this](const SessionModel::RawStackMove& move) {
      decoder_.move_raw_stacks(move);
    });
  });
  raw_stacks_kept_ = recording_.raw_stacks.size();
}

void IngestPipeline::finish(MonotonicNs end) {
  take_lifecycle_events();
  consume_into_model(MonotonicNs{UINT64_MAX});
  recording_.runtime_frames.settle_first_lines();
  timed([&] { model_.finish(end); });
}

void IngestPipeline::compact_stacks() {
  model_.compact_stacks(recording_, [this](const SessionModel::RawStackMove& move) {
    decoder_.move_raw_stacks(move);
  });
  raw_stacks_kept_ = recording_.raw_stacks.size();
}

void IngestPipeline::consume_into_model(MonotonicNs until) {
  take_lifecycle_events();  // the model sorts and erases what it takes: no index survives it
  timed([&] { model_.consume(recording_, until); });
  resolved_events_ = recording_.events.size();
}

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

ReplayedEvents replay_events(EventLogReader& reader, IngestPipeline& pipeline,
                             uint64_t events_per_batch) {
  Recording& recording = pipeline.recording();
  ReplayedEvents counts;
  MonotonicNs latest = recording.start_time;  // the latest event time seen
  while (std::optional<EventLogReader::Record> record = reader.next()) {
    switch (record->type) {
      case EventLogReader::Record::Type::kBpfEvent:
        pipeline.take_bpf_event(record->data, record->size);
        if (++counts.bpf_events % events_per_batch == 0 && !recording.samples.empty()) {
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

}  // namespace bpfprof
