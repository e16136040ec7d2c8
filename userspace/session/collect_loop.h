// The recording itself: the BPF programs and sampling set up, the targets started or found
// (record_targets.h), and events read into the ingest pipeline until the command exits, the
// -p processes are gone, -d's time is up or a signal ends it.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <unordered_map>

#include "userspace/capture/bpf_programs.h"
#include "userspace/capture/event_log.h"
#include "userspace/capture/ingest.h"
#include "userspace/capture/kernel_unwind.h"
#include "userspace/capture/perf_events.h"
#include "userspace/model/recording.h"
#include "userspace/session/periodic_driver.h"
#include "userspace/session/record_targets.h"
#include "userspace/session/recorder.h"

namespace bpfprof {

// When the recording reached each stage, and what it cost bpfprof: the verbose summary's.
struct CollectFigures {
  MonotonicNs invoked{0};
  MonotonicNs sampling_started{0};
  MonotonicNs targets_known{0};
  BpfPrograms::LoadTimes bpf_load{};
  double own_cpu_at_start_ms = 0;
  double own_cpu_while_recording_ms = 0;
};

// The ring buffer's size when --buffer-size is not given.
uint32_t default_ring_buffer_bytes(CallGraph call_graph, uint32_t cpus);

class CollectLoop {
 public:
  CollectLoop(const RecordOptions& options, MonotonicNs invoked);
  CollectLoop(const CollectLoop&) = delete;
  CollectLoop& operator=(const CollectLoop&) = delete;

  // In this order. Each throws RecordFailure, start_sampling() also what fails (the caller
  // says it in one line).
  // -- CMD: its process, forked first, while bpfprof is still small: its exec tears down the
  // memory it was forked with, which after the set-up (maps, tables) costs far more CPU.
  void fork_command(const std::optional<RunAsUser>& invoking_user) {
    targets_.fork_command(invoking_user);
  }
  // The BPF programs loaded and attached, sampling on every CPU; stop signals handled.
  void start_sampling();
  // Time zero of the recording; --save-events begins.
  void start_clock();
  // The command runs, or -p's processes (every one with -a) are followed.
  void start_targets();
  void record_existing_memory();
  // Reads events until the recording ends; `periodic` learns how far they are read.
  void collect(PeriodicOutputDriver& periodic);

  // The exit status of `record` once collect() returned: the command's when it exited,
  // 128+signal when a signal ended the recording.
  int exit_status() const;
  // The status when no profile could be written: the command's failure, else 1.
  int failed_status() const;

  Recording& recording() { return recording_; }
  const Recording& recording() const { return recording_; }
  IngestPipeline& pipeline() { return pipeline_; }
  const CollectFigures& figures() const { return figures_; }

 private:
  void start_kernel_unwinding();
  void open_event_log();
  void say_sampling_started() const;
  void attach_sampling();
  bool step(PeriodicOutputDriver& periodic);  // one poll; false once the recording should end
  int read_interval_ms(MonotonicNs now, const PeriodicOutputDriver& periodic);
  bool handle_stop_signals();
  void note_losses();
  void drain_side_band();
  void show_status();
  void stop_collecting();
  void save_trailer();
  void release_capture();

  const RecordOptions& options_;
  CollectFigures figures_;
  Recording recording_;
  IngestPipeline pipeline_;
  std::optional<BpfPrograms> bpf_;
  std::optional<KernelUnwindTables> kernel_unwind_;  // --call-graph dwarf; writes bpf_'s maps
  std::optional<SideBandReader> side_band_;
  SamplingEvents sampling_;
  std::unique_ptr<EventLogWriter> event_log_;
  RecordTargets targets_;
  uint64_t stack_copies_read_ = 0;    // fallback stack copies read until the last read
  MonotonicNs deadline_{UINT64_MAX};  // without -d, never

  int handled_signals_ = 0;
  int stop_signal_ = 0;
  // Losses are noticed per poll and kept with their time and process (profile markers).
  uint64_t lost_so_far_ = 0;
  std::unordered_map<Pid, uint64_t> lost_by_process_so_far_;
  // A terminal gets a status line, rewritten every second; a log file or pipe gets nothing.
  const bool show_status_;
  MonotonicNs next_status_{0};
};

}  // namespace bpfprof
