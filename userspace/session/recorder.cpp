#include "userspace/session/recorder.h"

#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>

#include "bpf/events.h"
#include "symbols/dwarf/debug_hint.h"
#include "symbols/dwarf/unwinder.h"
#include "symbols/util/text.h"
#include "userspace/capture/bpf_programs.h"
#include "userspace/capture/event_log.h"
#include "userspace/capture/ingest.h"
#include "userspace/capture/kernel_unwind.h"
#include "userspace/capture/perf_events.h"
#include "userspace/model/clocks.h"
#include "userspace/model/session_model.h"
#include "userspace/model/unwind_report.h"
#include "userspace/output/output_file.h"
#include "userspace/output/profile_writer.h"
#include "userspace/session/launcher.h"
#include "userspace/session/preflight.h"
#include "userspace/session/proc_snapshot.h"
#include "userspace/session/serve.h"
#include "userspace/session/signals.h"

namespace bpfprof {

namespace {

// A running process we attached to; readable once it has exited (immune to pid reuse).
UniqueFd open_pidfd(Pid pid) {
  return UniqueFd(static_cast<int>(syscall(SYS_pidfd_open, pid.value, 0)));
}

bool all_exited(const std::vector<UniqueFd>& pidfds) {
  if (pidfds.empty()) return false;
  std::vector<pollfd> fds;
  for (const UniqueFd& fd : pidfds) fds.push_back(pollfd{fd.get(), POLLIN, 0});
  if (poll(fds.data(), fds.size(), 0) < 0) return false;
  for (const pollfd& p : fds)
    if (!(p.revents & (POLLIN | POLLHUP))) return false;
  return true;
}

// Checks the -p targets before anything starts: each must exist.
std::optional<std::string> check_targets(const std::vector<int>& pids) {
  for (int pid : pids) {
    if (pid <= 0) return "invalid pid " + std::to_string(pid);
    if (kill(pid, 0) != 0 && errno == ESRCH) return "no process with pid " + std::to_string(pid);
    if (access(("/proc/" + std::to_string(pid) + "/maps").c_str(), R_OK) != 0)
      return "cannot read /proc/" + std::to_string(pid) + ": " + strerror(errno);
  }
  return std::nullopt;
}

constexpr int kReaderNiceBoost = 5;

std::string human_size(uint64_t bytes) {
  char text[32];
  if (bytes >= 10 << 20)
    snprintf(text, sizeof text, "%.0f MB", static_cast<double>(bytes) / (1 << 20));
  else if (bytes >= 1 << 20)
    snprintf(text, sizeof text, "%.1f MB", static_cast<double>(bytes) / (1 << 20));
  else
    snprintf(text, sizeof text, "%.0f KB", static_cast<double>(bytes) / 1024);
  return text;
}

void print_status_line(const Recording& recording, const SessionModel& model, uint64_t lost) {
  size_t processes = 0;
  for (const Process& p : model.processes()) processes += p.is_launcher ? 0 : 1;
  const double elapsed =
      static_cast<double>(monotonic_now().value - recording.start_time.value) / 1e9;
  fprintf(stderr,
          "\r\033[Kbpfprof: recording %.0f s, %llu samples, %llu lost, %zu processes, %zu threads",
          elapsed, static_cast<unsigned long long>(recording.stats.samples),
          static_cast<unsigned long long>(lost), processes, model.threads().size());
  fflush(stderr);
}

std::string process_label(const SessionModel& model, Pid pid) {
  std::string name = "?";
  for (const Process& p : model.processes())
    if (p.pid == pid) name = p.name;  // the latest entry of the pid
  return name + " (" + std::to_string(pid.value) + ")";
}

// Where events were lost: per CPU, and the top three processes.
void print_losses(const Recording& recording, const SessionModel& model) {
  auto top = [&](const std::unordered_map<Pid, uint64_t>& counts) {
    std::vector<std::pair<Pid, uint64_t>> sorted(counts.begin(), counts.end());
    std::sort(sorted.begin(), sorted.end(),
              [](const auto& a, const auto& b) { return a.second > b.second; });
    std::string text;
    for (size_t i = 0; i < sorted.size() && i < 3; ++i)
      text += (i ? ", " : "") + process_label(model, sorted[i].first) + " " +
              std::to_string(sorted[i].second);
    return text;
  };
  if (recording.stats.lost_bpf_events) {
    std::string per_cpu;
    for (size_t cpu = 0; cpu < recording.stats.lost_bpf_events_per_cpu.size(); ++cpu)
      if (uint64_t n = recording.stats.lost_bpf_events_per_cpu[cpu])
        per_cpu += (per_cpu.empty() ? "" : ", ") + ("CPU " + std::to_string(cpu)) + " " +
                   std::to_string(n);
    std::unordered_map<Pid, uint64_t> by_process;
    for (const LossRecord& loss : recording.losses) by_process[loss.pid] += loss.count;
    fprintf(stderr,
            "bpfprof: %llu events lost (ring buffer full; try a larger --buffer-size or a lower "
            "-F): %s; in %s\n",
            static_cast<unsigned long long>(recording.stats.lost_bpf_events), per_cpu.c_str(),
            top(by_process).c_str());
  }
}

// How many user stacks reach a thread root, as the profile shows them, where they do not,
// and what to do about it; for DWARF stacks, what unwinding cost.
void print_stack_completeness(const Recording& recording, const ProfileSummary& summary) {
  const StackCompleteness& stacks = summary.user_stacks;
  if (stacks.total <= 0) return;
  std::string worst;
  for (size_t i = 0; i < summary.incomplete_user_stacks_by_process.size() && i < 3; ++i) {
    const auto& [process, of_process] = summary.incomplete_user_stacks_by_process[i];
    char text[64];
    snprintf(text, sizeof text, " %.1f%%", 100.0 * of_process.share());
    worst += (i ? ", " : "; least complete: ") + process + text;
  }
  fprintf(stderr,
          "bpfprof: user stacks complete: %.1f%% of %.0f on-CPU samples reach a thread root (the "
          "rest begin "
          "with [truncated])%s\n",
          100.0 * stacks.share(), stacks.total, worst.c_str());
  if (recording.call_graph == "fp" && stacks.share() < 0.9)
    fprintf(stderr,
            "bpfprof: most code here has no frame pointers, so frame-pointer stacks stop early; "
            "the default "
            "--call-graph dwarf unwinds without them\n");
  const RecordingStats& s = recording.stats;
  if (!s.user_stacks) return;
  std::vector<uint32_t> times = s.unwind_ns;
  std::nth_element(times.begin(), times.begin() + times.size() / 2, times.end());
  const double per_stack = 1.0 / static_cast<double>(s.user_stacks);
  fprintf(stderr,
          "bpfprof: unwinding %.1f us per stack (median); %.0f bytes of stack copied per sample "
          "(%.0f bytes "
          "per event)\n",
          times.empty() ? 0.0 : times[times.size() / 2] / 1000.0,
          static_cast<double>(s.stack_copy_bytes) * per_stack,
          static_cast<double>(s.dwarf_sample_bytes) * per_stack);
  if (!s.raised_stack_copies.empty()) {
    std::string raised;
    for (const auto& [pid, bytes] : s.raised_stack_copies)
      raised +=
          (raised.empty() ? "" : ", ") + std::to_string(pid.value) + ": " + std::to_string(bytes);
    fprintf(stderr, "bpfprof: stacks cut at the copy's end got larger copies (pid: bytes): %s\n",
            raised.c_str());
  }
  if (s.stacks_cut_at_copy_end * 100 > s.user_stacks)
    fprintf(stderr, "bpfprof: %.1f%% of the stacks were cut where their copy ended%s\n",
            100.0 * static_cast<double>(s.stacks_cut_at_copy_end) * per_stack,
            recording.fixed_stack_copy_size
                ? "; a larger --call-graph dwarf,SIZE (up to 65528) reaches further"
                : " (before their process got a larger copy)");
}

// The processes that used the most CPU time (the kernel's accounting, summed over threads).
void print_top_processes(const SessionModel& model, size_t count) {
  std::vector<std::pair<uint64_t, const Process*>> by_cpu;
  for (const Process& p : model.processes()) {
    if (p.is_launcher) continue;
    uint64_t cpu = 0;
    for (ThreadIndex t : p.threads)
      for (const ThreadSample& s : model.threads()[t.value].samples) cpu += s.cpu_delta_ns;
    if (cpu) by_cpu.emplace_back(cpu, &p);
  }
  if (by_cpu.empty()) return;
  std::sort(by_cpu.begin(), by_cpu.end(),
            [](const auto& a, const auto& b) { return a.first > b.first; });
  std::string line = "bpfprof: top processes by CPU time:";
  for (size_t i = 0; i < by_cpu.size() && i < count; ++i) {
    char entry[320];
    snprintf(entry, sizeof entry, "%s %s (%d) %.2f s", i ? "," : "", by_cpu[i].second->name.c_str(),
             by_cpu[i].second->pid.value, static_cast<double>(by_cpu[i].first) / 1e9);
    line += entry;
  }
  if (by_cpu.size() > count) line += ", ... (" + std::to_string(by_cpu.size()) + " in all)";
  fprintf(stderr, "%s\n", line.c_str());
}

// Attaching holds one fd per mapped file, and there is one perf fd per CPU and event.
void raise_file_limit() {
  rlimit limit;
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    setrlimit(RLIMIT_NOFILE, &limit);
  }
}

// How much of the on-CPU time fell in code without a symbol, where, and how to get names.
void print_unnamed_code(const ProfileSummary& summary) {
  if (summary.unnamed_share_by_library.empty()) return;
  double total = 0;
  std::string where;
  for (size_t i = 0; i < summary.unnamed_share_by_library.size(); ++i) {
    const auto& [lib, share] = summary.unnamed_share_by_library[i];
    total += share;
    if (i < 3) {
      char text[64];
      snprintf(text, sizeof text, " %.1f%%", 100.0 * share);
      where += (i ? ", " : "") + lib + text;
    }
  }
  fprintf(stderr,
          "bpfprof: %.1f%% of on-CPU samples are in code without a symbol (no debug "
          "information?): %s\n",
          100.0 * total, where.c_str());
  if (const std::string hint = debug_info_hint(summary.unnamed_library_paths); !hint.empty())
    fprintf(stderr, "bpfprof:   %s\n", hint.c_str());
}

void print_top_functions(const ProfileSummary& summary) {
  if (summary.top_self_functions.empty()) return;
  fprintf(stderr, "bpfprof: top functions by on-CPU samples (self):\n");
  for (const auto& [name, share] : summary.top_self_functions)
    fprintf(stderr, "  %5.1f%%  %s\n", 100.0 * share, name.c_str());
}

void print_written_file(const std::string& path, OutputFormat format) {
  struct stat written {};
  stat(path.c_str(), &written);
  fprintf(stderr, "bpfprof: wrote %s (%s) — %s\n", path.c_str(),
          human_size(static_cast<uint64_t>(written.st_size)).c_str(),
          format == OutputFormat::kCollapsed
              ? "folded stacks for flamegraph.pl, inferno-flamegraph or speedscope"
              : "open it at https://profiler.firefox.com (Load a profile from file)");
}

// A failure that ends `record` with one line on stderr and this exit status.
struct RecordFailure : std::runtime_error {
  RecordFailure(int status, const std::string& message)
      : std::runtime_error(message), status(status) {}
  int status;
};

// Checks the options and the machine before anything starts.
void check_record_options(const RecordOptions& options) {
  const bool launch = !options.command.empty();
  const int modes =
      (launch ? 1 : 0) + (options.attach_pids.empty() ? 0 : 1) + (options.system_wide ? 1 : 0);
  if (modes != 1) throw RecordFailure(2, "give exactly one of -- CMD, -p PID or -a");
  if (std::optional<std::string> problem = check_environment(current_environment()))
    throw RecordFailure(2, *problem);
  if (launch && !find_executable(options.command[0]))
    throw RecordFailure(127, options.command[0] + ": command not found");
  if (std::optional<std::string> error = check_targets(options.attach_pids))
    throw RecordFailure(2, *error);
}

// Rows of unwind tables the kernel holds (16 bytes each in the array). A command with libc
// and ld.so needs ~31k; -a on this machine (69 files, fuzzers with sanitizers among them)
// loaded 1.9M, so the whole system gets twice the room: 64 MiB, against 32 MiB.
constexpr uint32_t kUnwindRowCapacity = 2u << 20;
constexpr uint32_t kSystemWideUnwindRowCapacity = 4u << 20;

Recording recording_for(const RecordOptions& options) {
  Recording recording;
  recording.frequency_hz = options.frequency_hz;
  recording.off_cpu = options.off_cpu.value_or(!options.system_wide);
  recording.call_graph = !options.user_stack_copy_bytes  ? "fp"
                         : options.walk_stacks_in_kernel ? "dwarf"
                                                         : "dwarf-copy";
  recording.fixed_stack_copy_size = options.fixed_stack_copy_size;
  return recording;
}

// One `bpfprof record`: set up sampling and BPF, start or find the targets, collect events
// until the recording ends, then write the profile and the summary.
class RecordSession {
 public:
  explicit RecordSession(const RecordOptions& options)
      : options_(options),
        invoked_(monotonic_now()),
        recording_(recording_for(options)),
        pipeline_(recording_, {.dwarf = options.user_stack_copy_bytes != 0,
                               .collapse_repeated_samples = !options.no_collapse}) {}

  // Each throws RecordFailure.
  void set_up();
  void start_targets();
  void collect();
  // The exit status of `record`.
  int finish();

 private:
  void open_event_log();
  void start_kernel_unwinding();
  void launch_command();
  void attach_targets();
  bool step();  // one poll of the event sources; false once the recording should end
  bool handle_stop_signals();
  void note_losses();
  void drain_side_band();
  void stop_collecting();
  void write_profile_and_summary();
  void print_summary(const ProfileSummary& summary, double own_cpu_writing_ms) const;

  const RecordOptions& options_;
  const MonotonicNs invoked_;
  std::optional<RunAsUser> invoking_user_;  // through sudo: the user who typed the command
  Recording recording_;
  IngestPipeline pipeline_;
  std::unique_ptr<CommittableSink> output_;
  std::optional<BpfPrograms> bpf_;
  std::optional<KernelUnwindTables> kernel_unwind_;  // --call-graph dwarf; writes bpf_'s maps
  std::optional<SideBandReader> side_band_;
  SamplingEvents sampling_;
  std::unique_ptr<EventLogWriter> event_log_;
  std::optional<LaunchedCommand> command_;
  std::vector<UniqueFd> target_pidfds_;

  MonotonicNs sampling_started_{0};
  MonotonicNs targets_known_{0};
  MonotonicNs deadline_{UINT64_MAX};  // without -d, never
  double own_cpu_at_start_ms_ = 0;
  double own_cpu_while_recording_ms_ = 0;

  int handled_signals_ = 0;
  int stop_signal_ = 0;
  bool command_exited_ = false;
  // Losses are noticed per poll and kept with their time and process (profile markers).
  uint64_t lost_so_far_ = 0;
  std::unordered_map<Pid, uint64_t> lost_by_process_so_far_;
  // A terminal gets a status line, rewritten every second; a log file or pipe gets nothing.
  const bool show_status_ = isatty(STDERR_FILENO) == 1;
  MonotonicNs next_status_{0};
};

void RecordSession::set_up() {
  raise_file_limit();
  check_record_options(options_);
  try {
    invoking_user_ = sudo_invoking_user();
    output_ = open_output(options_.output_path);  // fails now if the directory is not writable
    bpf_.emplace(/*track_all_processes=*/options_.system_wide, recording_.off_cpu,
                 1000000000ull / options_.frequency_hz, options_.user_stack_copy_bytes,
                 options_.ring_buffer_bytes,
                 !options_.walk_stacks_in_kernel ? 0
                 : options_.system_wide          ? kSystemWideUnwindRowCapacity
                                                 : kUnwindRowCapacity);
    if (options_.walk_stacks_in_kernel) start_kernel_unwinding();
    std::vector<int> cpus = online_cpus();
    side_band_.emplace(cpus);
    if (!options_.fixed_stack_copy_size) bpf_->adapt_stack_copies(pipeline_);
    bpf_->attach_lifecycle();
    sampling_ = open_sampling_events(options_.frequency_hz, cpus);
    recording_.sampling_event = sampling_.event_name;
    bpf_->attach_sampling(sampling_.fds);
  } catch (const RecordFailure&) {
    throw;
  } catch (const std::exception& e) {
    throw RecordFailure(2, e.what());
  }
  sampling_started_ = monotonic_now();
  install_stop_signal_handlers();
  recording_.start_time = monotonic_now();
  own_cpu_at_start_ms_ = process_cpu_ms();
  recording_.start_wall_clock_ms = wall_clock_ms_now();
  open_event_log();
}

// Tables for the files the tracked processes map, built (or read from their cache) on a
// worker thread as the mappings arrive, and the processes' mappings, into the BPF maps.
void RecordSession::start_kernel_unwinding() {
  // The cache is used by the worker thread only (it is not thread-safe).
  auto cache = std::make_shared<UnwindTableCache>(UnwindTableCache::default_directory(),
                                                  UnwindTableOptions{options_.symbol_dirs});
  kernel_unwind_.emplace(
      *bpf_->unwind_maps(), [cache](const std::string& path) { return cache->get(path); },
      options_.system_wide);
  pipeline_.observe_lifecycle_events([this](const std::vector<LifecycleEvent>& events,
                                            size_t from) { kernel_unwind_->apply(events, from); });
}

void RecordSession::open_event_log() {
  if (options_.save_events_path.empty()) return;
  try {
    event_log_ = std::make_unique<EventLogWriter>(
        options_.save_events_path,
        RecordingSettings{recording_.frequency_hz, recording_.sampling_event, recording_.off_cpu,
                          recording_.call_graph, recording_.start_time,
                          recording_.start_wall_clock_ms});
  } catch (const std::exception& e) {
    throw RecordFailure(2, e.what());
  }
  bpf_->save_events_to(event_log_.get());
}

void RecordSession::start_targets() {
  try {
    if (!options_.command.empty())
      launch_command();
    else
      attach_targets();
  } catch (const RecordFailure&) {
    throw;
  } catch (const std::exception& e) {
    throw RecordFailure(2, e.what());
  }
  targets_known_ = monotonic_now();
  // The reader must keep up with the ring buffer also when every CPU is busy (a stress run
  // on 2 CPUs with ~50 runnable threads left it ~4% of a CPU and lost half the events). The
  // command was forked before this and keeps its own priority.
  errno = 0;
  if (const int nice_now = getpriority(PRIO_PROCESS, 0); errno == 0)
    setpriority(PRIO_PROCESS, 0, std::max(-20, nice_now - kReaderNiceBoost));
  if (options_.duration_seconds)
    deadline_ = MonotonicNs{recording_.start_time.value +
                            static_cast<uint64_t>(*options_.duration_seconds * 1e9)};
  // Lifecycle events from the side band and /proc go to the event log as they are (the BPF
  // programs' events are saved raw as they are read).
  if (event_log_) event_log_->write_lifecycle_events(recording_.events, 0);
  pipeline_.take_lifecycle_events();
}

void RecordSession::launch_command() {
  command_.emplace(options_.command, options_.run_as_root ? std::nullopt : invoking_user_);
  bpf_->track_process(command_->pid());
  recording_.events.push_back(LifecycleEvent{
      recording_.start_time,
      ProcessStartEvent{command_->pid(), base_name(options_.command[0]), /*is_launcher=*/true}});
  if (std::optional<std::string> error = command_->release())
    throw RecordFailure(127, "cannot run " + options_.command[0] + ": " + *error);
}

// -p and -a. Track first, then read /proc: a thread or child created in between is seen by
// both, never by neither.
void RecordSession::attach_targets() {
  std::vector<Pid> targets;
  for (int pid : options_.attach_pids) targets.push_back(Pid{pid});
  if (options_.system_wide) targets = list_processes();
  for (Pid pid : targets) {
    if (options_.system_wide) continue;
    bpf_->track_process(pid);
    // Without it the recording could not tell when its targets are gone, and would never
    // end by itself.
    UniqueFd pidfd = open_pidfd(pid);
    if (!pidfd.valid())
      throw RecordFailure(
          2, "cannot follow pid " + std::to_string(pid.value) + ": " +
                 (errno == ESRCH ? "it exited before the recording started" : strerror(errno)));
    target_pidfds_.push_back(std::move(pidfd));
  }
  for (Pid pid : targets) {
    std::string error;
    std::optional<ProcessSnapshot> snapshot = snapshot_process(pid, &error);
    if (snapshot)
      append_snapshot_events(recording_.start_time, std::move(*snapshot), recording_.events);
    else if (!options_.system_wide)
      throw RecordFailure(2, error);
  }
}

void RecordSession::drain_side_band() {
  const size_t before = recording_.events.size();
  side_band_->drain(recording_.events);
  if (event_log_) event_log_->write_lifecycle_events(recording_.events, before);
}

void RecordSession::note_losses() {
  const uint64_t lost = bpf_->lost_events();
  if (lost == lost_so_far_) return;
  lost_so_far_ = lost;
  const MonotonicNs now = monotonic_now();
  for (const auto& [pid, count] : bpf_->lost_events_by_process()) {
    uint64_t& before = lost_by_process_so_far_[pid];
    if (count > before) recording_.losses.push_back(LossRecord{now, pid, count - before});
    before = count;
  }
}

void RecordSession::collect() {
  next_status_ = MonotonicNs{recording_.start_time.value + 1000000000};
  while (step()) {
  }
  recording_.end_time = monotonic_now();
  if (show_status_) fputs("\r\033[K", stderr);
  own_cpu_while_recording_ms_ = process_cpu_ms() - own_cpu_at_start_ms_;
  stop_collecting();
}

bool RecordSession::step() {
  if (show_status_ && monotonic_now() >= next_status_) {
    print_status_line(recording_, pipeline_.model(),
                      bpf_->lost_events() + side_band_->lost_records());
    next_status_.value += 1000000000;
  }
  // Until a new process's mappings and tables are in the kernel its samples fall back to
  // stack copies: in the first 200 ms, and while tables are being built, read sooner.
  const bool settling =
      kernel_unwind_ && (monotonic_now().value - recording_.start_time.value < 200'000'000 ||
                         kernel_unwind_->building());
  bpf_->wait(settling ? 5 : 50);
  // Mappings first: the samples read next come after them, and a DWARF sample is unwound
  // with the mappings of its process as they are then.
  drain_side_band();
  pipeline_.take_lifecycle_events();
  if (int n = bpf_->consume(pipeline_); n < 0) {
    fprintf(stderr, "bpfprof: reading BPF events failed: %s\n", strerror(-n));
    return false;
  }
  note_losses();
  if (kernel_unwind_) kernel_unwind_->flush();
  pipeline_.advance(monotonic_now());
  if (!handle_stop_signals()) return false;
  if (command_ && command_->poll_exited()) {
    command_exited_ = true;
    return false;
  }
  return !all_exited(target_pidfds_) && monotonic_now() < deadline_;
}

// False when a signal ends the recording.
bool RecordSession::handle_stop_signals() {
  const StopSignals signals = stop_signals();
  for (; handled_signals_ < signals.count; ++handled_signals_) {
    // A terminal's Ctrl-C already reached the command (same process group); a signal sent
    // to bpfprof alone is passed on, so the command can end and the profile be written.
    if (command_ && signals.from_a_process) command_->send_signal(signals.last);
  }
  if (handled_signals_ > 0 && !command_) {
    stop_signal_ = signals.last;  // attached or system-wide: a signal ends the recording
    return false;
  }
  if (handled_signals_ >= 3) {
    fprintf(stderr, "bpfprof: stopping the recording; the command keeps running\n");
    stop_signal_ = signals.last;
    return false;
  }
  return true;
}

// Stops sampling and takes in what is still in flight: the exit events of the last threads.
void RecordSession::stop_collecting() {
  bpf_->detach_sampling();
  sampling_.fds.clear();
  bpf_->drain(pipeline_);
  drain_side_band();
  pipeline_.take_lifecycle_events();
  note_losses();
  RecordingStats& stats = recording_.stats;
  stats.lost_bpf_events = bpf_->lost_events();
  stats.lost_bpf_events_per_cpu = bpf_->lost_events_per_cpu();
  stats.lost_sideband_records = side_band_->lost_records();
  if (kernel_unwind_) {
    kernel_unwind_->flush();
    KernelUnwindStats unwind = kernel_unwind_->stats();
    unwind.map_bytes = bpf_->unwind_map_bytes();
    unwind.fallbacks_by_reason = bpf_->unwind_fallbacks();
    stats.kernel_unwind = std::move(unwind);
  }
  if (!event_log_) return;
  bpf_->save_events_to(nullptr);
  try {
    event_log_->finish(
        RecordingTrailer{recording_.end_time, stats.lost_bpf_events, stats.lost_sideband_records});
    fprintf(stderr, "bpfprof: saved %.1f MB of events to %s\n",
            static_cast<double>(event_log_->bytes_written()) / 1e6,
            options_.save_events_path.c_str());
  } catch (const std::exception& e) {
    fprintf(stderr, "bpfprof: %s\n", e.what());
  }
}

int RecordSession::finish() {
  const int status = command_exited_ ? command_->exit_status()
                     : stop_signal_  ? 128 + stop_signal_
                                     : 0;
  fprintf(stderr, "bpfprof: recording ended after %.1f s; writing the profile\n",
          static_cast<double>(recording_.end_time.value - recording_.start_time.value) / 1e9);
  try {
    write_profile_and_summary();
  } catch (const std::exception& e) {
    fprintf(stderr, "bpfprof: cannot write the profile: %s\n", e.what());
    return command_exited_ && status != 0 ? status : 1;
  }
  if (options_.open && options_.format == OutputFormat::kFirefox)
    run_serve(ServeOptions{options_.output_path});
  return status;
}

void RecordSession::write_profile_and_summary() {
  ProfileSummary summary;
  {
    WritingProfile writing(output_->temp_path());
    pipeline_.finish(recording_.end_time);
    summary = write_profile(
        pipeline_.model(), recording_, *output_,
        ProfileOptions{options_.keep_idle_threads, options_.symbol_dirs, options_.format});
    output_->commit();
  }
  if (invoking_user_ &&
      chown(options_.output_path.c_str(), invoking_user_->uid, invoking_user_->gid) != 0)
    fprintf(stderr, "bpfprof: cannot give %s to %s: %s\n", options_.output_path.c_str(),
            invoking_user_->name.c_str(), strerror(errno));
  print_summary(summary, process_cpu_ms() - own_cpu_while_recording_ms_ - own_cpu_at_start_ms_);
}

double ms_between(MonotonicNs a, MonotonicNs b) {
  return (static_cast<double>(b.value) - static_cast<double>(a.value)) / 1e6;
}

void RecordSession::print_summary(const ProfileSummary& summary, double own_cpu_writing_ms) const {
  const Recording& r = recording_;
  fprintf(stderr,
          "bpfprof: start-up: sampling after %.0f ms, targets known after %.0f ms, first sample "
          "after %.0f ms; profile written %.0f ms after the end\n",
          ms_between(invoked_, sampling_started_), ms_between(invoked_, targets_known_),
          r.stats.first_sample_time.value ? ms_between(invoked_, r.stats.first_sample_time) : 0.0,
          ms_between(r.end_time, monotonic_now()));
  fprintf(stderr,
          "bpfprof: its own CPU time: %.0f ms while recording (%.2f%% of one CPU), %.0f ms "
          "writing the profile\n",
          own_cpu_while_recording_ms_,
          100.0 * own_cpu_while_recording_ms_ / std::max(1.0, ms_between(r.start_time, r.end_time)),
          own_cpu_writing_ms);
  fprintf(
      stderr,
      "bpfprof: %llu samples (%s, %u Hz) from %zu processes and %zu threads; %llu events lost\n",
      static_cast<unsigned long long>(r.stats.samples), r.sampling_event.c_str(), r.frequency_hz,
      summary.processes, summary.threads,
      static_cast<unsigned long long>(r.stats.lost_bpf_events + r.stats.lost_sideband_records));
  print_stack_completeness(r, summary);
  for (const auto& [label, value] : stack_source_report(r))
    fprintf(stderr, "bpfprof: %s: %s\n", label.c_str(), value.c_str());
  print_losses(r, pipeline_.model());
  print_unnamed_code(summary);
  print_top_processes(pipeline_.model(), 5);
  print_top_functions(summary);
  print_written_file(options_.output_path, options_.format);
}

}  // namespace

int run_record(const RecordOptions& options) {
  try {
    RecordSession session(options);
    session.set_up();
    session.start_targets();
    session.collect();
    return session.finish();
  } catch (const RecordFailure& failure) {
    fprintf(stderr, "bpfprof: %s\n", failure.what());
    return failure.status;
  }
}

}  // namespace bpfprof
