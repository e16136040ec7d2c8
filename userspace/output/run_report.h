// What a run measured, computed once and reported in two places: the profile's meta.extra
// (profile_extra_entries) and the end-of-run summary on stderr (cli/summary.h). Both read
// the same figures, so the two can never disagree.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "userspace/model/recording.h"
#include "userspace/model/session_model.h"
#include "userspace/output/profile_builder.h"

namespace bpfprof {

struct CpuLosses {
  uint32_t cpu;
  uint64_t count;
};

struct ProcessLosses {
  Pid pid;
  std::string process;  // "name (pid)", the name of the pid's latest process entry
  uint64_t count;
};

struct ProcessCpuTime {
  std::string name;
  Pid pid;
  uint64_t cpu_ns;  // the kernel's accounting, summed over the entry's threads
};

// The CPU time of the processes of one container, pod or service (context_label).
struct ContextCpuTime {
  std::string label;  // "(none)" for the processes without a context
  uint64_t processes = 0;
  uint64_t cpu_ns = 0;
};

// What unwinding copied stacks cost (DWARF mode only), per copy.
struct UnwindCost {
  uint64_t copied_stacks = 0;       // copies unwound in userspace
  uint64_t user_stacks = 0;         // of all taken (samples, switch-outs, wakers)
  double median_us = 0;             // unwinding one copy
  double total_ms = 0;              // all copies (estimated from the kept times past 64k)
  double stack_bytes_per_copy = 0;  // user-stack bytes
  double event_bytes_per_copy = 0;  // whole ring-buffer events
  // Processes whose copies grew, with their new size, in the recording's order.
  std::vector<std::pair<Pid, uint32_t>> raised_stack_copies;
  double cut_at_copy_end_share = 0;    // of the copies
  bool often_cut_at_copy_end = false;  // more than 1% of them: worth a word
  bool fixed_stack_copy_size = false;
};

struct RunReport {
  // How the recording was made.
  CallGraph call_graph = CallGraph::kFramePointers;
  std::string sampling_event;  // "cycles" or "cpu-clock"
  uint32_t frequency_hz = 0;
  uint64_t samples = 0;  // timer samples recorded (before collapsing)

  // What was lost: ring-buffer events (per CPU and by process, most first; the CPUs and
  // processes that lost any), and in all with the side band's lost records.
  uint64_t lost_ring_buffer_events = 0;
  uint64_t lost_events = 0;
  uint64_t late_events = 0;  // reached the model after their time (applied out of order)
  // Children left unsampled: the table of tracked processes (of this size) was full.
  uint64_t processes_not_followed = 0;
  uint32_t max_tracked_processes = 0;
  std::vector<CpuLosses> lost_by_cpu;
  std::vector<ProcessLosses> lost_by_process;

  // Measured on the stacks written (threads, samples, completeness, unnamed code, top
  // functions).
  ProfileSummary profile;
  double unnamed_share = 0;     // of on-CPU samples, summed over the libraries
  std::string debug_info_hint;  // what to install for names, when code was unnamed

  std::optional<UnwindCost> unwinding;
  // Where user stacks were unwound (kernel walk / fallback copy), bytes per sample, the
  // unwind tables and maps: (label, text), model/unwind_report.
  std::vector<std::pair<std::string, std::string>> stack_sources;
  // How reading each runtime's frames went (nothing when no interpreter was seen).
  std::map<RuntimeKind, RuntimeStats> runtimes;
  // Files that another user controls and that were refused (untrusted_file.h), each once:
  // "perf map /tmp/perf-1.map ignored: owned by uid 65534, ...".
  std::vector<std::string> refused_files;
  uint64_t refused_opens = 0;      // in all, a file refused again counting each time
  uint64_t copied_file_bytes = 0;  // other users' binaries and debug files read from copies
  // Processes that used CPU time, most first.
  std::vector<ProcessCpuTime> processes_by_cpu_time;
  // The same by container, pod or service, most first; empty when no process ran in a
  // container or pod and all in one service (or none).
  std::vector<ContextCpuTime> contexts_by_cpu_time;
  // Who woke the threads (with off-CPU recording), and what the wakers' stacks cost.
  bool wakers = false;
  WakingStats wakings;
};

// "N wakeups of profiled threads; waker stacks: ..." for the summary and meta.extra.
std::string wakings_text(const WakingStats& wakings);
// "docker 4f1c0ed7c1c6 1.20 s (3 processes), nginx.service 0.40 s (2 processes), ...".
std::string contexts_text(const std::vector<ContextCpuTime>& contexts);
// "producer (1234) 950.0 ms in 2000 wakeups, interrupt: hrtimer_wakeup 3.1 ms in 3 wakeups".
std::string top_wakers_text(const ProcessWakers& wakers);

RunReport build_run_report(const Recording& recording, const SessionModel& model,
                           const ProfileSummary& summary);

// One entry of the profile's meta.extra: {label, format, value}.
struct ReportEntry {
  std::string label;
  std::string format;  // "string", "integer", "percentage"
  std::variant<std::string, uint64_t, double> value;
};
std::vector<ReportEntry> profile_extra_entries(const RunReport& report);

// Shows a report to the user (the command line prints it to stderr).
using RunReportPrinter = std::function<void(const RunReport&)>;

// "name 12.5%, other 3.0%": the first `count` of `shares` (fractions), as the summary and
// meta.extra say them.
std::string shares_text(const std::vector<std::pair<std::string, double>>& shares, size_t count);

}  // namespace bpfprof
