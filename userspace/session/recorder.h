// Session control for `bpfprof record`: sets up sampling and BPF, starts or finds the
// targets, collects events until the recording ends (collect_loop.h), writes profiles while
// it goes on (periodic_driver.h), then writes the profile (output_writer.h) and the summary.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "userspace/output/profile_writer.h"
#include "userspace/output/run_report.h"

namespace bpfprof {

// --allocations' mean bytes between two sampled allocator calls, as Go's heap profile.
inline constexpr uint64_t kDefaultAllocationPeriod = 512 * 1024;

struct RecordOptions {
  uint32_t frequency_hz = 1000;
  std::string output_path = "profile.json.gz";
  std::optional<double> duration_seconds;
  // Exactly one of these four says what to record.
  std::vector<std::string> command;  // launch it and follow its process tree
  std::vector<int> attach_pids;      // -p: running processes, their threads and children
  bool system_wide = false;          // -a: every process and kernel thread
  // --cgroup: the processes in these cgroups' subtrees, those starting in them later too.
  std::vector<std::string> cgroup_paths;
  bool keep_idle_threads = false;  // also write threads that got no sample
  bool embed_sources = false;      // the sampled source files' text in the profile
  // Python frames read in the kernel and merged in place of the interpreter loop's frames;
  // --no-python-frames leaves them native.
  bool python_frames = true;
  // Stacks of threads while they wait, and for how long. Unset: on for a command and -p,
  // off for -a.
  std::optional<bool> off_cpu;
  // With off-CPU time: who woke each thread (--no-wakers: not), and from which wait length
  // on a wait gets a marker (--wake-threshold; unset: one sampling interval).
  bool wakers = true;
  std::optional<double> wake_threshold_ms;
  // --memory: each process's resident memory over time, from the kernel's own counters.
  bool memory = false;
  // --allocations: the C allocator's calls, one sampled per this many bytes on average (0:
  // not recorded); with the memory track, in place of --memory's page faults.
  uint64_t allocation_period = 0;
  std::vector<std::string> symbol_dirs;  // --symbol-dir: more places to look for debug files
  // --call-graph: how user stacks are taken.
  CallGraph call_graph = CallGraph::kDwarf;
  // With DWARF: this many bytes of the stack copied per sample (all of them with
  // dwarf-copy, the fallbacks' with dwarf) and unwound in userspace; 0 with fp.
  uint32_t user_stack_copy_bytes = 16384;
  // DWARF: the copy size was given (dwarf,SIZE) and stays; else processes whose stacks are
  // cut at the copy's end get larger copies.
  bool fixed_stack_copy_size = false;
  // --save-events: also write the raw event stream there, for `bpfprof replay`.
  std::string save_events_path;
  // --buffer-size: the BPF ring buffer (a power of two); events that do not fit are lost.
  // Unset: default_ring_buffer_bytes.
  std::optional<uint32_t> ring_buffer_bytes;
  // --max-processes: the most processes of the command's tree (or -p's) followed at once;
  // the children started while that many are followed go unsampled, counted.
  uint32_t max_processes = 65536;
  // --format collapsed: folded stacks instead of a Firefox Profiler profile.
  OutputFormat format = OutputFormat::kFirefox;
  // --open: serve the written profile for the Firefox Profiler until Ctrl-C.
  bool open = false;
  // -v: the full end-of-run summary (start-up, own CPU, unwinding, wakers, every note);
  // without it, what was recorded, problems with their fixes, the top functions.
  bool verbose = false;
  // --run-as-root: under sudo, run the command as root rather than as the invoking user.
  bool run_as_root = false;
  // --no-collapse: one sample per timer tick, even when consecutive ones are identical.
  bool no_collapse = false;
  // --switch-output: a complete profile every this many seconds, NAME.TIME.EXT (and one for
  // the last period at the end); --switch-output-files: keep the newest N (0: all).
  std::optional<double> switch_output_seconds;
  size_t switch_output_files = 0;
  // --flight-recorder: keep only this many seconds of samples; write them on SIGUSR2
  // (NAME.TIME.EXT) and at the end (the output file).
  std::optional<double> flight_recorder_seconds;
  // --upload: also push each profile written (every period, and the last) as pprof to this
  // Pyroscope-compatible server.
  std::string upload_url;
};

// A failure that ends `record` with one line on stderr and this exit status.
struct RecordFailure : std::runtime_error {
  RecordFailure(int status, const std::string& message)
      : std::runtime_error(message), status(status) {}
  int status;
};

// Returns the exit status for bpfprof: the command's status when one was launched; 2 for
// errors before the recording started; 128+signal when a signal ended the recording.
// `print_report` prints the end-of-run summary (the command line's business: cli/summary.h).
int run_record(const RecordOptions& options, const RunReportPrinter& print_report);

}  // namespace bpfprof
