// The one way events become the session model, for a live recording and for the replay of
// a saved stream alike, so that a replay gives the very profile the recording wrote:
//   lifecycle events (side band, /proc snapshots, and the forks/execs/exits the decoder
//   appends) get their files pinned (MappedFiles) and update the unwinder's mappings;
//   BPF events are decoded (DWARF stacks unwound with the mappings as they are then);
//   the model takes, in time order, what is older than the reorder window.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <set>

#include "runtimes/registry.h"
#include "userspace/capture/event_decoder.h"
#include "userspace/capture/mapped_files.h"
#include "userspace/model/recording.h"
#include "userspace/model/session_model.h"

namespace bpfprof {

class DwarfUnwinder;

class IngestPipeline {
 public:
  // Events older than this go into the model: a recording reads its rings every 100 ms (a
  // read stops after 100 ms of work), so anything older is in; the CPUs' rings interleave.
  static constexpr uint64_t kReorderWindowNs = 500'000'000;

  struct Options {
    bool dwarf = false;                     // DWARF recordings need an unwinder
    bool collapse_repeated_samples = true;  // see SessionModel
    // A live recording's pids are running processes: it opens the files they map while they
    // still map them (MappedFiles), and reads each exec'd process's context from /proc. A
    // replay must not: the pids of a saved stream are no longer (or are other) processes, so
    // it reads the files at their paths (and the contexts the log saved).
    bool live_processes = true;
    // The runtimes whose frames are read (runtimes/registry.h): their code is read from the
    // live processes (a live recording only: the processes of a replayed stream are gone,
    // and a fuzzed one names processes at random); the others' native frames stay.
    bool runtime_frames = false;
    std::set<RuntimeKind> runtimes_not_read{};  // with runtime_frames: e.g. --no-python-frames
    // Measure the model's CPU time (model_cpu_ms): two system calls per batch, which a
    // replay reports and a live recording does not pay for.
    bool time_model = false;
  };
  IngestPipeline(Recording& recording, const Options& options);
  ~IngestPipeline();
  IngestPipeline(const IngestPipeline&) = delete;
  IngestPipeline& operator=(const IngestPipeline&) = delete;

  // Lifecycle events appended to recording().events since the last call: their files are
  // pinned and the unwinder's mappings updated. Call before the BPF events that follow them.
  void take_lifecycle_events();
  // Also called with those events, once resolved (the in-kernel unwinder's bookkeeping).
  using LifecycleObserver = std::function<void(const std::vector<LifecycleEvent>&, size_t from)>;
  void observe_lifecycle_events(LifecycleObserver observer) { observer_ = std::move(observer); }
  void take_bpf_event(const void* data, size_t size);
  // A live recording's lifecycle sources (the side band's mappings, the BPF forks and
  // execs): reads what happened up to now into recording().events, and says from when with
  // lifecycle_read_until. A stack copy is unwound as it is decoded, with its process's
  // mappings at its time: one newer than the last read (it came into the ring while the batch
  // was being read) has them read first.
  using LifecycleRead = std::function<void()>;
  void read_lifecycle_with(LifecycleRead read) { read_lifecycle_ = std::move(read); }
  // Everything in the lifecycle sources before `time` has been read (by the recorder).
  void lifecycle_read_until(MonotonicNs time) { lifecycle_read_until_ = time; }
  // The end of a batch of events (a poll): the model takes what is older than `now` minus
  // the reorder window, and the processes that exited are forgotten by the unwinder.
  void advance(MonotonicNs now);
  // Everything into the model; the recording ends at `end`.
  void finish(MonotonicNs end);
  // Drops the stacks no sample kept (after a rotating output dropped what it wrote): in the
  // model, the recording and the decoder alike.
  void compact_stacks();
  // How many raw stack nodes were kept by the last compaction of the raw stacks, which
  // advance() does whenever the tree has grown past twice that and kRawStackSlack more.
  static constexpr size_t kRawStackSlack = 256 * 1024;

  Recording& recording() { return recording_; }
  SessionModel& model() { return model_; }
  const SessionModel& model() const { return model_; }
  EventDecoder& decoder() { return decoder_; }
  // The runtimes' processes found so far, and what the kernel side must learn about them.
  Runtimes& runtimes() { return runtimes_; }
  // The model's share of the work, with Options::time_model.
  double model_cpu_ms() const { return model_cpu_ms_; }

 private:
  void consume_into_model(MonotonicNs until);
  void read_lifecycle_up_to(const void* data, size_t size);
  void compact_raw_stacks_if_grown();
  // Runs `work`, its thread CPU time added to model_cpu_ms_ with Options::time_model.
  template <typename Work>
  void timed(Work&& work);

  Recording& recording_;
  std::unique_ptr<DwarfUnwinder> unwinder_;
  Runtimes runtimes_;
  EventDecoder decoder_;
  MappedFiles mapped_files_;  // holds files that will not be at their path at the end
  const bool live_processes_;
  const bool time_model_;
  SessionModel model_;
  LifecycleObserver observer_;
  LifecycleRead read_lifecycle_;
  MonotonicNs lifecycle_read_until_{0};
  size_t resolved_events_ = 0;  // recording_.events before this index were taken
  double model_cpu_ms_ = 0;
  size_t raw_stacks_kept_ = 0;
};

// A saved stream fed through the pipeline (replay, fuzzing).
class EventLogReader;
struct RecordingSettings;

// A recording with a saved stream's settings, before any event.
Recording recording_for(const RecordingSettings& settings);

struct ReplayedEvents {
  uint64_t bpf_events = 0;
  uint64_t lifecycle_events = 0;
  bool complete = false;  // the stream had its trailer
};

// Feeds every record of `reader` through `pipeline`, advancing it every `events_per_batch`
// BPF events as a live recording's polls would. Throws std::runtime_error on a corrupt record.
ReplayedEvents replay_events(EventLogReader& reader, IngestPipeline& pipeline,
                             uint64_t events_per_batch);

}  // namespace bpfprof
