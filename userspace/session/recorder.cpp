#include "userspace/session/recorder.h"

#include <malloc.h>
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
#include <new>
#include <stdexcept>
#include <system_error>

#include "bpf/events.h"
#include "symbols/dwarf/debug_hint.h"
#include "symbols/dwarf/unwinder.h"
#include "symbols/util/read_file.h"
#include "symbols/util/text.h"
#include "userspace/capture/bpf_programs.h"
#include "userspace/capture/event_log.h"
#include "userspace/capture/ingest.h"
#include "userspace/capture/kernel_unwind.h"
#include "userspace/capture/perf_events.h"
#include "userspace/model/clocks.h"
#include "userspace/model/session_model.h"
#include "userspace/output/output_file.h"
#include "userspace/output/profile_writer.h"
#include "userspace/session/launcher.h"
#include "userspace/session/periodic_output.h"
#include "userspace/session/preflight.h"
#include "userspace/session/proc_snapshot.h"
#include "userspace/session/program_files.h"
#include "userspace/session/serve.h"
#include "userspace/session/signals.h"
#include "userspace/session/uploader.h"

namespace bpfprof {

namespace {

// One line for an exception: what it says, and for a lack of memory (an allocation, a thread
// that could not get its stack) that a memory limit may be the cause.
std::string describe_failure(const std::exception& e) {
  bool memory = dynamic_cast<const std::bad_alloc*>(&e) != nullptr;
  if (const auto* system = dynamic_cast<const std::system_error*>(&e))
    memory = system->code().value() == ENOMEM || system->code().value() == EAGAIN;
  if (!memory) return e.what();
  const std::string detail =
      dynamic_cast<const std::bad_alloc*>(&e) ? "" : e.what() + std::string("; ");
  return "out of memory (" + detail +
         "is a memory limit, ulimit -v or a cgroup's, below what bpfprof needs?)";
}

// A running process we attached to; readable once it has exited (immune to pid reuse).
UniqueFd open_pidfd(Pid pid) {
  return UniqueFd(static_cast<int>(syscall(SYS_pidfd_open, pid.value, 0)));
}

// The pidfds of the processes still running (a pidfd is readable once its process exited).
std::vector<int> running(const std::vector<UniqueFd>& pidfds) {
  std::vector<pollfd> fds;
  for (const UniqueFd& fd : pidfds) fds.push_back(pollfd{fd.get(), POLLIN, 0});
  const bool polled = poll(fds.data(), fds.size(), 0) >= 0;
  std::vector<int> out;
  for (const pollfd& p : fds)
    if (!polled || !(p.revents & (POLLIN | POLLHUP))) out.push_back(p.fd);
  return out;
}

bool all_exited(const std::vector<UniqueFd>& pidfds) {
  return !pidfds.empty() && running(pidfds).empty();
}

// The process (thread group) a task id belongs to, from /proc/ID/status.
std::optional<int> thread_group_of(int id) {
  std::optional<std::string> status = read_entire_file("/proc/" + std::to_string(id) + "/status");
  if (!status) return std::nullopt;
  const size_t at = status->find("\nTgid:");
  if (at == std::string::npos) return std::nullopt;
  return atoi(status->c_str() + at + 6);
}

// Checks the -p targets before anything starts: each must exist.
std::optional<std::string> check_targets(const std::vector<int>& pids) {
  for (int pid : pids) {
    if (pid <= 0) return "invalid pid " + std::to_string(pid);
    if (kill(pid, 0) != 0 && errno == ESRCH) return "no process with pid " + std::to_string(pid);
    if (access(("/proc/" + std::to_string(pid) + "/maps").c_str(), R_OK) != 0)
      return "cannot read /proc/" + std::to_string(pid) + ": " + strerror(errno);
    // A thread's id passes the checks above (kill and /proc accept it) but cannot be
    // followed as a process.
    if (std::optional<int> tgid = thread_group_of(pid); tgid && *tgid != pid)
      return std::to_string(pid) + " is a thread of process " + std::to_string(*tgid) +
             "; give the process id (-p " + std::to_string(*tgid) + ")";
  }
  return std::nullopt;
}

constexpr int kReaderNiceBoost = 5;

// How long the reader sleeps between reads of the rings (the BPF side wakes it sooner when
// a ring fills up or, with the kernel unwinder, when a tracked process is new), and while
// a new process's mappings are on their way to the kernel.
constexpr int kPollMs = 100;
constexpr int kSettlingPollMs = 5;
constexpr int kCopyPollMs = 50;
// Stacks walked in the kernel, nothing waiting for a read: the ring holds seconds of samples,
// and on a busy machine every read preempts a profiled thread and runs with cold caches. The
// targets' exits and the stop signals end a wait at once.
constexpr int kQuietPollMs = 500;

// --upload: how long the end waits for profiles still queued or under way.
constexpr double kUploadWaitSeconds = 5;

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

// Attaching holds one fd per mapped file, and there is one perf fd per CPU and event.
void raise_file_limit() {
  rlimit limit;
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    setrlimit(RLIMIT_NOFILE, &limit);
  }
}

void print_written_file(const std::string& path, OutputFormat format) {
  struct stat written {};
  stat(path.c_str(), &written);
  // A device or a pipe (-o /dev/stdout) has no size to show.
  const std::string size = S_ISREG(written.st_mode)
                               ? " (" + human_size(static_cast<uint64_t>(written.st_size)) + ")"
                               : "";
  fprintf(stderr, "bpfprof: wrote %s%s — %s\n", path.c_str(), size.c_str(),
          format == OutputFormat::kCollapsed
              ? "folded stacks for flamegraph.pl, inferno-flamegraph or speedscope"
          : format == OutputFormat::kPprof
              ? "pprof: go tool pprof, Pyroscope, Parca"
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

// Runtimes whose frames stay native, as the options say.
std::set<RuntimeKind> runtimes_not_read(const RecordOptions& options) {
  if (options.python_frames) return {};
  return {RuntimeKind::kPython};
}

Recording recording_for(const RecordOptions& options) {
  Recording recording;
  recording.frequency_hz = options.frequency_hz;
  recording.off_cpu = options.off_cpu.value_or(!options.system_wide);
  recording.record_wakers = recording.off_cpu && options.wakers;
  if (options.wake_threshold_ms)
    recording.wake_threshold_ns = static_cast<uint64_t>(*options.wake_threshold_ms * 1e6);
  recording.call_graph = options.call_graph;
  recording.fixed_stack_copy_size = options.fixed_stack_copy_size;
  return recording;
}

// The wall clock at t, ms since the epoch.
double wall_clock_ms_at(const Recording& recording, MonotonicNs t) {
  return recording.start_wall_clock_ms + ms_between(recording.start_time, t);
}

// A period's profile, written on the background writer's thread: the model as it was (with
// the period's samples) and the recording's metadata, copied when the period ended.
struct PeriodSnapshot {
  SessionModel model;
  Recording recording;
  MonotonicNs start;
  MonotonicNs end;
};

// One `bpfprof record`: set up sampling and BPF, start or find the targets, collect events
// until the recording ends, then write the profile and the summary.
class RecordSession {
 public:
  RecordSession(const RecordOptions& options, const RunReportPrinter& print_report)
      : options_(options),
        print_report_(print_report),
        invoked_(monotonic_now()),
        recording_(recording_for(options)),
        pipeline_(recording_, {.dwarf = uses_dwarf(options.call_graph),
                               .collapse_repeated_samples = !options.no_collapse,
                               .runtime_frames = true,
                               .runtimes_not_read = runtimes_not_read(options)}) {}

  // Each throws RecordFailure.
  void set_up();
  void start_targets();
  void say_sampling_started() const;
  void collect();
  // The exit status of `record`.
  int finish();

 private:
  void open_event_log();
  void start_kernel_unwinding();
  void launch_command();
  void preload_command_tables();
  void attach_targets();
  bool step();  // one poll of the event sources; false once the recording should end
  int read_interval_ms(MonotonicNs now);
  bool handle_stop_signals();
  void note_losses();
  void drain_side_band();
  void stop_collecting();
  void write_while_recording(MonotonicNs now);
  void write_period(MonotonicNs start, MonotonicNs end);
  void write_snapshot(PeriodSnapshot& period);
  void prepare_final_period();
  void upload(const SessionModel& model, Recording& recording, MonotonicNs start, MonotonicNs end,
              ProfileSymbolizer& symbolizer);
  void finish_uploads();
  MonotonicNs window_start(MonotonicNs until, double seconds) const;
  std::optional<RunReport> write_profile_to(CommittableSink& sink, std::string* error);
  std::vector<std::string> fallback_directories() const;
  std::optional<std::string> write_profile_elsewhere(std::optional<RunReport>& report,
                                                     WritingProfile& writing);
  void give_to_invoking_user(const std::string& path) const;
  void print_summary(const RunReport& report, const std::string& written,
                     double own_cpu_writing_ms) const;

  const RecordOptions& options_;
  const RunReportPrinter& print_report_;
  const MonotonicNs invoked_;
  std::optional<RunAsUser> invoking_user_;  // through sudo: the user who typed the command
  Recording recording_;
  IngestPipeline pipeline_;
  std::string output_path_;  // where the profile goes at the end
  std::unique_ptr<CommittableSink> output_;
  std::optional<BpfPrograms> bpf_;
  std::optional<KernelUnwindTables> kernel_unwind_;  // --call-graph dwarf; writes bpf_'s maps
  std::optional<SideBandReader> side_band_;
  SamplingEvents sampling_;
  std::unique_ptr<EventLogWriter> event_log_;
  std::optional<LaunchedCommand> command_;
  std::vector<UniqueFd> target_pidfds_;
  UniqueFd command_pidfd_;          // its exit ends a wait for the rings at once
  uint64_t stack_copies_read_ = 0;  // fallback stack copies read until the last read

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
  // --switch-output and --flight-recorder: the files written so far, where the current
  // period began, and when to rotate (or forget old samples) next.
  std::optional<RotatedFiles> rotated_;
  MonotonicNs period_start_{0};
  MonotonicNs next_period_check_{0};
  MonotonicNs next_compaction_{0};                 // --flight-recorder: of the stack trees
  std::optional<MonotonicNs> final_period_start_;  // the profile at the end covers from there
  std::unique_ptr<Uploader> uploader_;             // --upload
  // --switch-output and --flight-recorder: writes the periods' profiles from snapshots while
  // the recording goes on. Last: its thread uses the members above until it is joined.
  std::optional<BackgroundWriter> period_writer_;
};

void RecordSession::set_up() {
  // Always, and first: without --flight-recorder a SIGUSR2 would otherwise end bpfprof (its
  // default action), during the set-up (the verifier's ~0.7 s) as well as later.
  install_dump_signal_handler();
  raise_file_limit();
  check_record_options(options_);
  try {
    invoking_user_ = sudo_invoking_user();
    // The command's process is forked first, while bpfprof is still small: its exec tears
    // down the memory it was forked with, which after the set-up took ~6 ms of CPU (samples
    // of the launcher, which no output shows). It waits for release() in launch_command().
    if (!options_.command.empty())
      command_.emplace(options_.command, options_.run_as_root ? std::nullopt : invoking_user_);
    output_path_ = options_.output_path;
    output_ = open_output(output_path_);  // fails now if the directory is not writable
    bpf_.emplace(BpfPrograms::Config{
        .track_all_processes = options_.system_wide,
        .record_off_cpu = recording_.off_cpu,
        .sampling_interval_ns = 1000000000ull / options_.frequency_hz,
        .user_stack_copy_bytes = options_.user_stack_copy_bytes,
        .fallback_copies_whole_stack =
            options_.call_graph == CallGraph::kDwarf && !options_.fixed_stack_copy_size,
        .ring_buffer_bytes = options_.ring_buffer_bytes,
        .unwind_row_capacity = options_.call_graph != CallGraph::kDwarf ? 0
                               : options_.system_wide ? kSystemWideUnwindRowCapacity
                                                      : kUnwindRowCapacity,
        .record_wakers = recording_.record_wakers,
        .max_tracked_processes = options_.max_processes});
    if (options_.call_graph == CallGraph::kDwarf) start_kernel_unwinding();
    std::vector<int> cpus = online_cpus();
    side_band_.emplace(cpus);
    // The side band first: it notes when the read began, and the forks and execs before that
    // are in their ring by then.
    pipeline_.read_lifecycle_with([this] {
      drain_side_band();
      bpf_->read_lifecycle_ring();
    });
    if (!options_.fixed_stack_copy_size) bpf_->adapt_stack_copies(pipeline_);
    bpf_->attach_lifecycle();
    sampling_ = open_sampling_events(options_.frequency_hz, cpus);
    recording_.sampling_event = sampling_.event_name;
    bpf_->attach_sampling(sampling_.fds);
  } catch (const RecordFailure&) {
    throw;
  } catch (const std::exception& e) {
    throw RecordFailure(2, describe_failure(e));
  }
  sampling_started_ = monotonic_now();
  install_stop_signal_handlers();
  if (options_.switch_output_seconds) rotated_.emplace(options_.switch_output_files);
  if (options_.switch_output_seconds || options_.flight_recorder_seconds) period_writer_.emplace();
  // The window's top wakers are those of the waits woken in the window.
  if (options_.flight_recorder_seconds) pipeline_.model().keep_wakers_by_second();
  if (!options_.upload_url.empty()) {
    Uploader::Options upload;
    upload.url = options_.upload_url;
    upload.sample_rate_hz = options_.frequency_hz;
    uploader_ = std::make_unique<Uploader>(upload);
  }
  recording_.start_time = monotonic_now();
  period_start_ = recording_.start_time;
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
  bpf_->apply_runtime_changes(pipeline_);  // interpreters already running: their frames now
  if (!command_) say_sampling_started();
}

// -p and -a: what runs from now on is in the profile (the set-up took ~0.2-0.7 s).
void RecordSession::say_sampling_started() const {
  const std::string what = options_.system_wide
                               ? std::string("every process")
                               : std::to_string(options_.attach_pids.size()) +
                                     (options_.attach_pids.size() == 1 ? " process" : " processes");
  char until[64] = "";
  if (options_.duration_seconds)
    snprintf(until, sizeof until, " for %g s", *options_.duration_seconds);
  fprintf(stderr, "bpfprof: sampling %s from now%s; Ctrl-C ends the recording\n", what.c_str(),
          until);
}

void RecordSession::launch_command() {
  if (kernel_unwind_) preload_command_tables();
  bpf_->track_process(command_->pid(), BpfPrograms::Tracked::kLaunchedBeforeExec);
  command_pidfd_ = open_pidfd(command_->pid());
  recording_.events.push_back(LifecycleEvent{
      recording_.start_time,
      ProcessStartEvent{command_->pid(), base_name(options_.command[0]), /*is_launcher=*/true}});
  if (std::optional<std::string> error = command_->release())
    throw RecordFailure(127, "cannot run " + options_.command[0] + ": " + *error);
}

// The tables of the files the command maps as it starts (program_files.h), loaded before it
// runs: without them its first ~10 ms of samples fell back to stack copies. A table still
// being built (the first run on a machine: no cache yet) is loaded as usual when it is done.
void RecordSession::preload_command_tables() {
  constexpr std::chrono::milliseconds kLongestWait{500};
  const std::optional<std::string> executable = find_executable(options_.command[0]);
  if (!executable) return;
  kernel_unwind_->preload(files_mapped_at_start(*executable));
  kernel_unwind_->wait_for_tables(kLongestWait);
  kernel_unwind_->flush(monotonic_now());
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

// Also tells the pipeline from when the lifecycle sources are read: the BPF lifecycle ring
// is read after this (in consume(), or by the pipeline's lifecycle read).
void RecordSession::drain_side_band() {
  const MonotonicNs read_start = monotonic_now();
  const size_t before = recording_.events.size();
  side_band_->drain(recording_.events);
  if (event_log_) event_log_->write_lifecycle_events(recording_.events, before);
  pipeline_.lifecycle_read_until(read_start);
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
  std::vector<int> running_targets = running(target_pidfds_);
  if (command_pidfd_.valid()) running_targets.push_back(command_pidfd_.get());
  bpf_->wait(read_interval_ms(monotonic_now()), running_targets);
  // Whatever happened before this moment is in the rings now: read below, it is all in.
  const MonotonicNs read_start = monotonic_now();
  // Mappings first: the samples read next come after them, and a DWARF sample is unwound
  // with the mappings of its process as they are then.
  drain_side_band();
  pipeline_.take_lifecycle_events();
  if (int n = bpf_->consume(pipeline_); n < 0) {
    fprintf(stderr, "bpfprof: reading BPF events failed: %s\n", strerror(-n));
    return false;
  }
  note_losses();
  if (kernel_unwind_) kernel_unwind_->flush(read_start);
  // With events left in the ring (the budget ran out), only what is older than the last
  // one read is surely in.
  MonotonicNs all_read_before = read_start;
  if (!bpf_->ring_emptied() && !recording_.samples.empty())
    all_read_before = std::min(read_start, recording_.samples.back().time);
  pipeline_.advance(all_read_before);
  write_while_recording(all_read_before);
  if (!handle_stop_signals()) return false;
  if (!options_.flight_recorder_seconds && take_dump_request())
    fputs("bpfprof: SIGUSR2 ignored: it writes a profile with --flight-recorder only\n", stderr);
  if (command_ && command_->poll_exited()) {
    command_exited_ = true;
    return false;
  }
  return !all_exited(target_pidfds_) && monotonic_now() < deadline_;
}

int RecordSession::read_interval_ms(MonotonicNs now) {
  // Until a new process's mappings and tables are in the kernel its samples fall back to
  // stack copies: read sooner while a process is new (the BPF side wakes the reader at its
  // fork or exec). Otherwise seldom: on a busy machine every wakeup preempts a profiled
  // thread, and costs ~40 us of CPU here.
  if (kernel_unwind_ && kernel_unwind_->settling(now)) return kSettlingPollMs;
  // Every sample a stack copy (dwarf-copy): the ring fills ~20 times faster, and a process's
  // first batch decides how large its copies must be (stacks cut before that stay cut).
  if (uses_dwarf(options_.call_graph) && !kernel_unwind_) return kCopyPollMs;
  // Fallback copies since the last read: a table waits to be loaded (a library just mapped).
  const uint64_t copies =
      recording_.stats.on_cpu_stacks.copied + recording_.stats.off_cpu_stacks.copied;
  const bool fell_back = copies != stack_copies_read_;
  stack_copies_read_ = copies;
  const bool periodic = options_.flight_recorder_seconds || options_.switch_output_seconds ||
                        uploader_ || show_status_;
  if (!kernel_unwind_ || fell_back || periodic) return kPollMs;
  if (deadline_.value == UINT64_MAX) return kQuietPollMs;
  const uint64_t left_ms =
      deadline_.value > now.value ? (deadline_.value - now.value) / 1000000 : 0;
  return static_cast<int>(std::clamp<uint64_t>(left_ms + 1, 1, kQuietPollMs));
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
  stats.processes_not_followed = bpf_->processes_not_followed();
  stats.max_tracked_processes = options_.max_processes;
  stats.lost_bpf_events_per_cpu = bpf_->lost_events_per_cpu();
  stats.lost_sideband_records = side_band_->lost_records();
  if (kernel_unwind_) {
    kernel_unwind_->flush(monotonic_now());
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
  const int failed_status = command_exited_ && status != 0 ? status : 1;
  std::string error;
  std::string written = output_path_;
  std::optional<RunReport> report;
  {
    // From here on a stop signal does not lose what was recorded (a third one does). Said
    // only now: a signal sent on seeing the line must find the writing phase begun.
    WritingProfile writing(output_->temp_path());
    fprintf(stderr, "bpfprof: recording ended after %.1f s; writing the profile\n",
            static_cast<double>(recording_.end_time.value - recording_.start_time.value) / 1e9);
    if (period_writer_) period_writer_->finish();  // the periods before come first
    pipeline_.finish(recording_.end_time);
    prepare_final_period();
    written = output_path_;
    writing.now_writing(output_->temp_path());
    report = write_profile_to(*output_, &error);
    if (!report) {
      fprintf(stderr, "bpfprof: cannot write the profile: %s\n", error.c_str());
      // What was recorded is not lost for a full disk or a directory removed meanwhile.
      std::optional<std::string> fallback = write_profile_elsewhere(report, writing);
      if (!fallback) return failed_status;
      written = *fallback;
      fprintf(stderr, "bpfprof: wrote the profile to %s instead\n", written.c_str());
    }
  }
  give_to_invoking_user(written);
  if (rotated_ && written == output_path_)
    for (const std::string& gone : rotated_->written(written))
      fprintf(stderr, "bpfprof: removed %s (--switch-output-files)\n", gone.c_str());
  finish_uploads();
  print_summary(*report, written,
                process_cpu_ms() - own_cpu_while_recording_ms_ - own_cpu_at_start_ms_);
  if (written != output_path_) return failed_status;
  if (options_.open && options_.format == OutputFormat::kFirefox)
    run_serve(ServeOptions{output_path_, 0, true, options_.symbol_dirs});
  return status;
}

// Where a kept window of `seconds` begins when the samples reach `until`.
MonotonicNs RecordSession::window_start(MonotonicNs until, double seconds) const {
  const auto keep = static_cast<uint64_t>(seconds * 1e9);
  return MonotonicNs{
      std::max(recording_.start_time.value, until.value > keep ? until.value - keep : 0)};
}

// What a period's profile and the old stack trees used is free now, but main() asks glibc to
// keep up to 256 MB of free heap: a -a run kept ~150 MB more after every period (its RSS
// grew from 0.5 to 2.8 GB in 30 minutes; resident after trimming: ~90-140 MB).
void release_freed_memory() { malloc_trim(0); }

// --switch-output: once a period is in the model (which holds what is older than the reorder
// window), its samples become one file and leave memory. --flight-recorder: samples older
// than the last DURATION leave memory; SIGUSR2 writes what is left.
void RecordSession::write_while_recording(MonotonicNs now) {
  if (now.value < recording_.start_time.value + IngestPipeline::kReorderWindowNs) return;
  const MonotonicNs in_model{now.value - IngestPipeline::kReorderWindowNs};
  if (options_.flight_recorder_seconds) {
    const MonotonicNs from = window_start(in_model, *options_.flight_recorder_seconds);
    const bool dump = take_dump_request();
    if (dump || now >= next_period_check_) {
      pipeline_.model().drop_samples_before(from);
      pipeline_.model().forget_ended_before(from);
      next_period_check_ = MonotonicNs{now.value + 1'000'000'000};
    }
    // Once per DURATION: the stacks of the samples forgotten go too.
    if (now >= next_compaction_) {
      pipeline_.compact_stacks();
      release_freed_memory();
      next_compaction_ =
          MonotonicNs{now.value + static_cast<uint64_t>(*options_.flight_recorder_seconds * 1e9)};
    }
    if (dump) write_period(from, in_model);
    return;
  }
  if (!options_.switch_output_seconds ||
      in_model.value <
          period_start_.value + static_cast<uint64_t>(*options_.switch_output_seconds * 1e9))
    return;
  write_period(period_start_, in_model);
  pipeline_.model().drop_samples_before(MonotonicNs{UINT64_MAX});  // written, or lost with a note
  pipeline_.model().forget_ended_before(in_model);
  pipeline_.model().clear_waker_totals();
  pipeline_.compact_stacks();
  release_freed_memory();
  period_start_ = in_model;
}

// The period [start, end) of the model's samples goes to the background writer as a
// snapshot (the model with its samples, the recording's metadata); the recording goes on.
void RecordSession::write_period(MonotonicNs start, MonotonicNs end) {
  auto period = std::make_shared<PeriodSnapshot>(
      PeriodSnapshot{pipeline_.model(), copy_without_pending(recording_), start, end});
  if (period_writer_->submit([this, period] { write_snapshot(*period); }))
    fputs("bpfprof: the recording waited for the profile of a period before to be written\n",
          stderr);
}

// On the background writer's thread. It reads options_, output_path_ and invoking_user_,
// which the recording loop does not change, and is the only user of rotated_ until it is
// finished. An error is said in one line and the recording goes on.
void RecordSession::write_snapshot(PeriodSnapshot& period) {
  const std::string path =
      period_file_name(output_path_, wall_clock_ms_at(period.recording, period.start));
  const double seconds = ms_between(period.start, period.end) / 1e3;
  // Names the code of this period only: a symbolizer kept for every period held everything
  // a long -a run ever met (RSS grew by ~2 MB/s with 10 s periods).
  SystemSymbolizer symbolizer(SymbolizerOptions{options_.symbol_dirs});
  if (show_status_) fputs("\r\033[K", stderr);
  try {
    PeriodWindow window(period.recording, period.start, period.end);
    std::unique_ptr<CommittableSink> sink = open_output(path);
    write_profile_with_report(period.model, period.recording, *sink,
                              ProfileOptions{options_.keep_idle_threads, options_.symbol_dirs,
                                             options_.format, options_.embed_sources},
                              symbolizer);
    sink->commit();
  } catch (const std::exception& e) {
    fprintf(stderr, "bpfprof: cannot write the profile of %.1f s (its samples are lost): %s\n",
            seconds, e.what());
    return;
  }
  give_to_invoking_user(path);
  fprintf(stderr, "bpfprof: wrote %s (%.1f s)\n", path.c_str(), seconds);
  if (rotated_)
    for (const std::string& gone : rotated_->written(path))
      fprintf(stderr, "bpfprof: removed %s (--switch-output-files)\n", gone.c_str());
  upload(period.model, period.recording, period.start, period.end, symbolizer);
}

// --upload: the period [start, end) as pprof, queued for the uploader's thread.
void RecordSession::upload(const SessionModel& model, Recording& recording, MonotonicNs start,
                           MonotonicNs end, ProfileSymbolizer& symbolizer) {
  if (!uploader_) return;
  const double from_s = wall_clock_ms_at(recording, start) / 1e3;
  const double until_s = wall_clock_ms_at(recording, end) / 1e3;
  try {
    PeriodWindow window(recording, start, end);
    StringSink pprof;
    write_profile_with_report(
        model, recording, pprof,
        ProfileOptions{options_.keep_idle_threads, options_.symbol_dirs, OutputFormat::kPprof},
        symbolizer);
    uploader_->submit(pprof.take(), from_s, until_s);
  } catch (const std::exception& e) {
    fprintf(stderr, "bpfprof: cannot make the profile to upload: %s\n", e.what());
  }
}

// The last profile goes too; the end waits a few seconds at most for the backend.
void RecordSession::finish_uploads() {
  if (!uploader_) return;
  SystemSymbolizer symbolizer(SymbolizerOptions{options_.symbol_dirs});
  upload(pipeline_.model(), recording_, final_period_start_.value_or(recording_.start_time),
         recording_.end_time, symbolizer);
  const Uploader::Counts counts = uploader_->finish(kUploadWaitSeconds);
  fprintf(stderr, "bpfprof: uploaded %llu profiles to %s",
          static_cast<unsigned long long>(counts.sent), options_.upload_url.c_str());
  if (counts.failed + counts.dropped > 0)
    fprintf(stderr, "; %llu failed, %llu dropped (last error: %s)",
            static_cast<unsigned long long>(counts.failed),
            static_cast<unsigned long long>(counts.dropped), counts.last_error.c_str());
  fputc('\n', stderr);
}

// At the end, --switch-output writes the last period to a file of its own name (the output
// file stays unused) and --flight-recorder the last DURATION to the output file.
void RecordSession::prepare_final_period() {
  if (options_.flight_recorder_seconds) {
    final_period_start_ = window_start(recording_.end_time, *options_.flight_recorder_seconds);
    pipeline_.model().drop_samples_before(*final_period_start_);
    return;
  }
  if (!options_.switch_output_seconds) return;
  final_period_start_ = period_start_;
  const std::string path =
      period_file_name(output_path_, wall_clock_ms_at(recording_, period_start_));
  try {
    output_ = open_output(path);
    output_path_ = path;
  } catch (const std::exception&) {
    // The output file's sink stays: its failure leads to the fallback places as usual.
  }
}

// The report, or nullopt with the reason in `error`.
std::optional<RunReport> RecordSession::write_profile_to(CommittableSink& sink,
                                                         std::string* error) {
  try {
    std::optional<PeriodWindow> window;  // --switch-output, --flight-recorder: the last period
    if (final_period_start_) window.emplace(recording_, *final_period_start_, recording_.end_time);
    RunReport report =
        write_profile_with_report(pipeline_.model(), recording_, sink,
                                  ProfileOptions{options_.keep_idle_threads, options_.symbol_dirs,
                                                 options_.format, options_.embed_sources});
    sink.commit();
    return report;
  } catch (const std::exception& e) {
    *error = e.what();
    return std::nullopt;
  }
}

// Where a profile goes when its own place fails: $TMPDIR (else /tmp), then the invoking
// user's ~/.cache/bpfprof.
std::vector<std::string> RecordSession::fallback_directories() const {
  const char* tmpdir = getenv("TMPDIR");
  std::vector<std::string> dirs{tmpdir && *tmpdir ? tmpdir : "/tmp"};
  const char* home = invoking_user_ ? invoking_user_->home.c_str() : getenv("HOME");
  if (home && *home) {
    const std::string cache = std::string(home) + "/.cache";
    for (const std::string& dir : {cache, cache + "/bpfprof"}) {
      if (mkdir(dir.c_str(), 0755) == 0 && invoking_user_) give_to_invoking_user(dir);
    }
    dirs.push_back(cache + "/bpfprof");
  }
  return dirs;
}

// Writes the profile under the output's file name in the first fallback directory that takes
// it; its path, or nullopt (each failure said in one line).
std::optional<std::string> RecordSession::write_profile_elsewhere(std::optional<RunReport>& report,
                                                                  WritingProfile& writing) {
  for (const std::string& dir : fallback_directories()) {
    const std::string path = dir + "/" + base_name(output_path_);
    if (path == output_path_) continue;
    std::string error;
    try {
      std::unique_ptr<CommittableSink> sink = open_output(path);
      writing.now_writing(sink->temp_path());
      report = write_profile_to(*sink, &error);
      if (report) return path;
    } catch (const std::exception& e) {
      error = e.what();
    }
    fprintf(stderr, "bpfprof: cannot write the profile there either: %s\n", error.c_str());
  }
  fprintf(stderr, "bpfprof: no profile written\n");
  return std::nullopt;
}

void RecordSession::give_to_invoking_user(const std::string& path) const {
  // lchown: a link that replaced the file meanwhile gives nothing of root's away.
  if (invoking_user_ && lchown(path.c_str(), invoking_user_->uid, invoking_user_->gid) != 0)
    fprintf(stderr, "bpfprof: cannot give %s to %s: %s\n", path.c_str(),
            invoking_user_->name.c_str(), strerror(errno));
}

void RecordSession::print_summary(const RunReport& report, const std::string& written,
                                  double own_cpu_writing_ms) const {
  const Recording& r = recording_;
  if (!options_.verbose) {
    print_report_(report);
    print_written_file(written, options_.format);
    return;
  }
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
  print_report_(report);
  print_written_file(written, options_.format);
}

}  // namespace

int run_record(const RecordOptions& options, const RunReportPrinter& print_report) {
  try {
    RecordSession session(options, print_report);
    session.set_up();
    session.start_targets();
    session.collect();
    return session.finish();
  } catch (const RecordFailure& failure) {
    fprintf(stderr, "bpfprof: %s\n", failure.what());
    return failure.status;
  } catch (const std::exception& e) {
    // Out of memory (or any failure) past the set-up: one line and a status, not an abort.
    fprintf(stderr, "bpfprof: %s\n", describe_failure(e).c_str());
    return 1;
  }
}

}  // namespace bpfprof
