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

namespace bpfprof {

namespace {

// Lock-free atomics: safe in a signal handler, and two signals handled at once on two
// threads both count.
static_assert(std::atomic<int>::is_always_lock_free && std::atomic<bool>::is_always_lock_free);
std::atomic<int> g_signal_count{0};
std::atomic<int> g_last_signal{0};
std::atomic<bool> g_signal_from_process{false};  // sent with kill(), not by the terminal

// Set while the profile is written; then the temporary file to remove if the user insists
// on stopping (only async-signal-safe calls in the handler). The path is complete before
// g_writing is set (release), and read only after the handler sees it set (acquire).
std::atomic<bool> g_writing{false};
char g_writing_temp_path[4096];

void write_stderr(const char* text) {
  ssize_t ignored = write(STDERR_FILENO, text, strlen(text));
  (void)ignored;
}

void on_stop_signal(int sig, siginfo_t* info, void*) {
  g_last_signal = sig;
  g_signal_from_process = info && info->si_code <= 0;  // SI_USER, SI_QUEUE, SI_TKILL
  const int count = g_signal_count.fetch_add(1) + 1;
  if (!g_writing.load(std::memory_order_acquire)) return;
  // What was recorded is being written: a signal is not a reason to lose it, unless it is
  // the third one.
  if (count < 3) {
    write_stderr("\nbpfprof: still writing the profile; a third Ctrl-C aborts without it\n");
    return;
  }
  if (g_writing_temp_path[0]) unlink(g_writing_temp_path);
  write_stderr("\nbpfprof: aborted; no profile written\n");
  _exit(128 + sig);
}

void install_signal_handlers() {
  struct sigaction sa {};
  sa.sa_sigaction = on_stop_signal;
  sa.sa_flags = SA_SIGINFO;  // no SA_RESTART: poll() returns early with EINTR
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT}) sigaction(sig, &sa, nullptr);
}

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

// Rows of unwind tables the kernel holds (16 bytes each in the array: 32 MiB): libc has
// ~35k, python3.11 ~110k.
constexpr uint32_t kUnwindRowCapacity = 2u << 20;

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

}  // namespace

int run_record(const RecordOptions& options) {
  const MonotonicNs invoked = monotonic_now();
  raise_file_limit();
  const bool launch = !options.command.empty();
  const int modes =
      (launch ? 1 : 0) + (options.attach_pids.empty() ? 0 : 1) + (options.system_wide ? 1 : 0);
  if (modes != 1) {
    fprintf(stderr, "bpfprof: give exactly one of -- CMD, -p PID or -a\n");
    return 2;
  }
  if (std::optional<std::string> problem = check_environment(current_environment())) {
    fprintf(stderr, "bpfprof: %s\n", problem->c_str());
    return 2;
  }
  // Through sudo, the command runs as the user who typed it, and the profile is theirs.
  std::optional<RunAsUser> invoking_user;
  try {
    invoking_user = sudo_invoking_user();
  } catch (const std::exception& e) {
    fprintf(stderr, "bpfprof: %s\n", e.what());
    return 2;
  }
  if (launch && !find_executable(options.command[0])) {
    fprintf(stderr, "bpfprof: %s: command not found\n", options.command[0].c_str());
    return 127;
  }
  if (std::optional<std::string> error = check_targets(options.attach_pids)) {
    fprintf(stderr, "bpfprof: %s\n", error->c_str());
    return 2;
  }

  std::unique_ptr<CommittableSink> output;
  std::optional<BpfPrograms> bpf;
  std::optional<KernelUnwindTables> kernel_unwind;  // after bpf: it writes into its maps
  std::optional<SideBandReader> side_band;
  SamplingEvents sampling;
  Recording recording;
  recording.frequency_hz = options.frequency_hz;
  recording.off_cpu = options.off_cpu.value_or(!options.system_wide);
  recording.call_graph = !options.user_stack_copy_bytes  ? "fp"
                         : options.walk_stacks_in_kernel ? "dwarf"
                                                         : "dwarf-copy";
  recording.fixed_stack_copy_size = options.fixed_stack_copy_size;
  IngestPipeline pipeline(recording, /*dwarf=*/options.user_stack_copy_bytes != 0,
                          !options.no_collapse);
  SessionModel& model = pipeline.model();
  try {
    output = open_output(options.output_path);  // fails now if the directory is not writable
    bpf.emplace(/*track_all_processes=*/options.system_wide, recording.off_cpu,
                1000000000ull / options.frequency_hz, options.user_stack_copy_bytes,
                options.ring_buffer_bytes, options.walk_stacks_in_kernel ? kUnwindRowCapacity : 0);
    if (options.walk_stacks_in_kernel) {
      // Used by the table worker thread only (the cache is not thread-safe).
      kernel_unwind.emplace(
          *bpf->unwind_maps(),
          [cache = std::make_shared<UnwindTableCache>(UnwindTableCache::default_directory(),
                                                      UnwindTableOptions{options.symbol_dirs})](
              const std::string& path) { return cache->get(path); },
          options.system_wide);
      pipeline.observe_lifecycle_events([&](const std::vector<LifecycleEvent>& events,
                                            size_t from) { kernel_unwind->apply(events, from); });
    }
    std::vector<int> cpus = online_cpus();
    side_band.emplace(cpus);
    if (!options.fixed_stack_copy_size) bpf->adapt_stack_copies(pipeline);
    bpf->attach_lifecycle();
    sampling = open_sampling_events(options.frequency_hz, cpus);
    recording.sampling_event = sampling.event_name;
    bpf->attach_sampling(sampling.fds);
  } catch (const std::exception& e) {
    fprintf(stderr, "bpfprof: %s\n", e.what());
    return 2;
  }

  const MonotonicNs sampling_started = monotonic_now();
  install_signal_handlers();
  std::optional<LaunchedCommand> command;
  std::vector<UniqueFd> target_pidfds;
  recording.start_time = monotonic_now();
  const double own_cpu_at_start_ms = process_cpu_ms();
  recording.start_wall_clock_ms = wall_clock_ms_now();
  std::unique_ptr<EventLogWriter> event_log;
  if (!options.save_events_path.empty()) {
    try {
      event_log = std::make_unique<EventLogWriter>(
          options.save_events_path,
          RecordingSettings{recording.frequency_hz, recording.sampling_event, recording.off_cpu,
                            recording.call_graph, recording.start_time,
                            recording.start_wall_clock_ms});
    } catch (const std::exception& e) {
      fprintf(stderr, "bpfprof: %s\n", e.what());
      return 2;
    }
    bpf->save_events_to(event_log.get());
  }
  // Lifecycle events from the side band and /proc go to the event log as they are (the BPF
  // programs' events are saved raw as they are read).
  auto drain_side_band = [&] {
    const size_t before = recording.events.size();
    side_band->drain(recording.events);
    if (event_log) event_log->write_lifecycle_events(recording.events, before);
  };
  try {
    if (launch) {
      command.emplace(options.command, options.run_as_root ? std::nullopt : invoking_user);
      bpf->track_process(command->pid());
      recording.events.push_back(LifecycleEvent{
          recording.start_time,
          ProcessStartEvent{command->pid(), base_name(options.command[0]), /*is_launcher=*/true}});
      if (std::optional<std::string> error = command->release()) {
        fprintf(stderr, "bpfprof: cannot run %s: %s\n", options.command[0].c_str(), error->c_str());
        return 127;
      }
    } else {
      // Track first, then read /proc: a thread or child created in between is seen by both,
      // never by neither.
      std::vector<Pid> targets;
      for (int pid : options.attach_pids) targets.push_back(Pid{pid});
      if (options.system_wide) targets = list_processes();
      for (Pid pid : targets) {
        if (!options.system_wide) {
          bpf->track_process(pid);
          // Without it the recording could not tell when its targets are gone, and would
          // never end by itself.
          UniqueFd pidfd = open_pidfd(pid);
          if (!pidfd.valid()) {
            fprintf(stderr, "bpfprof: cannot follow pid %d: %s\n", pid.value,
                    errno == ESRCH ? "it exited before the recording started" : strerror(errno));
            return 2;
          }
          target_pidfds.push_back(std::move(pidfd));
        }
      }
      for (Pid pid : targets) {
        std::string error;
        std::optional<ProcessSnapshot> snapshot = snapshot_process(pid, &error);
        if (snapshot) {
          append_snapshot_events(recording.start_time, std::move(*snapshot), recording.events);
        } else if (!options.system_wide) {
          fprintf(stderr, "bpfprof: %s\n", error.c_str());
          return 2;
        }
      }
    }
  } catch (const std::exception& e) {
    fprintf(stderr, "bpfprof: %s\n", e.what());
    return 2;
  }

  const MonotonicNs targets_known = monotonic_now();
  // The reader must keep up with the ring buffer also when every CPU is busy (a stress run
  // on 2 CPUs with ~50 runnable threads left it ~4% of a CPU and lost half the events). The
  // command was forked before this and keeps its own priority.
  errno = 0;
  if (const int nice_now = getpriority(PRIO_PROCESS, 0); errno == 0)
    setpriority(PRIO_PROCESS, 0, std::max(-20, nice_now - kReaderNiceBoost));
  // Without -d, never.
  const MonotonicNs deadline{options.duration_seconds
                                 ? recording.start_time.value +
                                       static_cast<uint64_t>(*options.duration_seconds * 1e9)
                                 : UINT64_MAX};
  if (event_log) event_log->write_lifecycle_events(recording.events, 0);
  pipeline.take_lifecycle_events();
  int handled_signals = 0;
  int stop_signal = 0;
  bool command_exited = false;
  // Losses are noticed per poll and kept with their time and process (profile markers).
  uint64_t lost_so_far = 0;
  std::unordered_map<Pid, uint64_t> lost_by_process_so_far;
  auto note_losses = [&] {
    const uint64_t lost = bpf->lost_events();
    if (lost == lost_so_far) return;
    lost_so_far = lost;
    const MonotonicNs now = monotonic_now();
    for (const auto& [pid, count] : bpf->lost_events_by_process()) {
      uint64_t& before = lost_by_process_so_far[pid];
      if (count > before) recording.losses.push_back(LossRecord{now, pid, count - before});
      before = count;
    }
  };
  // A terminal gets a status line, rewritten every second; a log file or pipe gets nothing.
  const bool show_status = isatty(STDERR_FILENO) == 1;
  MonotonicNs next_status{recording.start_time.value + 1000000000};
  while (true) {
    if (show_status && monotonic_now() >= next_status) {
      print_status_line(recording, model, bpf->lost_events() + side_band->lost_records());
      next_status.value += 1000000000;
    }
    // Until a new process's mappings and tables are in the kernel its samples fall back to
    // stack copies: in the first 200 ms, and while tables are being built, read sooner.
    const bool settling =
        kernel_unwind && (monotonic_now().value - recording.start_time.value < 200'000'000 ||
                          kernel_unwind->building());
    bpf->wait(settling ? 5 : 50);
    // Mappings first: the samples read next come after them, and a DWARF sample is unwound
    // with the mappings of its process as they are then.
    drain_side_band();
    pipeline.take_lifecycle_events();
    if (int n = bpf->consume(pipeline); n < 0) {
      fprintf(stderr, "bpfprof: reading BPF events failed: %s\n", strerror(-n));
      break;
    }
    note_losses();
    if (kernel_unwind) kernel_unwind->flush();
    pipeline.advance(monotonic_now());
    while (handled_signals < g_signal_count) {
      ++handled_signals;
      // A terminal's Ctrl-C already reached the command (same process group); a signal sent
      // to bpfprof alone is passed on, so the command can end and the profile be written.
      if (command && g_signal_from_process) command->send_signal(g_last_signal);
    }
    if (handled_signals > 0 && !command) {
      stop_signal = g_last_signal;  // attached or system-wide: a signal ends the recording
      break;
    }
    if (handled_signals >= 3) {
      fprintf(stderr, "bpfprof: stopping the recording; the command keeps running\n");
      stop_signal = g_last_signal;
      break;
    }
    if (command && command->poll_exited()) {
      command_exited = true;
      break;
    }
    if (all_exited(target_pidfds)) break;
    if (monotonic_now() >= deadline) break;
  }
  recording.end_time = monotonic_now();
  if (show_status) fputs("\r\033[K", stderr);
  const double own_cpu_while_recording_ms = process_cpu_ms() - own_cpu_at_start_ms;
  bpf->detach_sampling();
  sampling.fds.clear();
  // Collect what is still in flight: the exit events of the last threads.
  bpf->drain(pipeline);
  drain_side_band();
  pipeline.take_lifecycle_events();
  note_losses();
  recording.stats.lost_bpf_events = bpf->lost_events();
  recording.stats.lost_bpf_events_per_cpu = bpf->lost_events_per_cpu();
  recording.stats.lost_sideband_records = side_band->lost_records();
  if (kernel_unwind) {
    kernel_unwind->flush();
    KernelUnwindStats stats = kernel_unwind->stats();
    stats.map_bytes = bpf->unwind_map_bytes();
    stats.fallbacks_by_reason = bpf->unwind_fallbacks();
    recording.stats.kernel_unwind = std::move(stats);
  }
  if (event_log) {
    bpf->save_events_to(nullptr);
    try {
      event_log->finish(RecordingTrailer{recording.end_time, recording.stats.lost_bpf_events,
                                         recording.stats.lost_sideband_records});
      fprintf(stderr, "bpfprof: saved %.1f MB of events to %s\n",
              static_cast<double>(event_log->bytes_written()) / 1e6,
              options.save_events_path.c_str());
    } catch (const std::exception& e) {
      fprintf(stderr, "bpfprof: %s\n", e.what());
    }
  }

  int status = command_exited ? command->exit_status() : stop_signal ? 128 + stop_signal : 0;
  snprintf(g_writing_temp_path, sizeof g_writing_temp_path, "%s", output->temp_path().c_str());
  g_writing.store(true, std::memory_order_release);
  fprintf(stderr, "bpfprof: recording ended after %.1f s; writing the profile\n",
          static_cast<double>(recording.end_time.value - recording.start_time.value) / 1e9);
  try {
    pipeline.finish(recording.end_time);
    ProfileSummary summary = write_profile(
        model, recording, *output,
        ProfileOptions{options.keep_idle_threads, options.symbol_dirs, options.format});
    output->commit();
    g_writing.store(false, std::memory_order_release);
    if (invoking_user &&
        chown(options.output_path.c_str(), invoking_user->uid, invoking_user->gid) != 0)
      fprintf(stderr, "bpfprof: cannot give %s to %s: %s\n", options.output_path.c_str(),
              invoking_user->name.c_str(), strerror(errno));
    auto ms_between = [](MonotonicNs a, MonotonicNs b) {
      return (static_cast<double>(b.value) - a.value) / 1e6;
    };
    fprintf(stderr,
            "bpfprof: start-up: sampling after %.0f ms, targets known after %.0f ms, first sample "
            "after %.0f ms; "
            "profile written %.0f ms after the end\n",
            ms_between(invoked, sampling_started), ms_between(invoked, targets_known),
            recording.stats.first_sample_time.value
                ? ms_between(invoked, recording.stats.first_sample_time)
                : 0.0,
            ms_between(recording.end_time, monotonic_now()));
    fprintf(stderr,
            "bpfprof: its own CPU time: %.0f ms while recording (%.2f%% of one CPU), %.0f ms "
            "writing the profile\n",
            own_cpu_while_recording_ms,
            100.0 * own_cpu_while_recording_ms /
                std::max(1.0, ms_between(recording.start_time, recording.end_time)),
            process_cpu_ms() - own_cpu_while_recording_ms - own_cpu_at_start_ms);
    fprintf(
        stderr,
        "bpfprof: %llu samples (%s, %u Hz) from %zu processes and %zu threads; %llu events lost\n",
        static_cast<unsigned long long>(recording.stats.samples), recording.sampling_event.c_str(),
        recording.frequency_hz, summary.processes, summary.threads,
        static_cast<unsigned long long>(recording.stats.lost_bpf_events +
                                        recording.stats.lost_sideband_records));
    print_stack_completeness(recording, summary);
    for (const auto& [label, value] : stack_source_report(recording))
      fprintf(stderr, "bpfprof: %s: %s\n", label.c_str(), value.c_str());
    print_losses(recording, model);
    if (!summary.unnamed_share_by_library.empty()) {
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
    print_top_processes(model, 5);
    if (!summary.top_self_functions.empty()) {
      fprintf(stderr, "bpfprof: top functions by on-CPU samples (self):\n");
      for (const auto& [name, share] : summary.top_self_functions)
        fprintf(stderr, "  %5.1f%%  %s\n", 100.0 * share, name.c_str());
    }
    struct stat written {};
    stat(options.output_path.c_str(), &written);
    fprintf(stderr, "bpfprof: wrote %s (%s) — %s\n", options.output_path.c_str(),
            human_size(static_cast<uint64_t>(written.st_size)).c_str(),
            options.format == OutputFormat::kCollapsed
                ? "folded stacks for flamegraph.pl, inferno-flamegraph or speedscope"
                : "open it at https://profiler.firefox.com (Load a profile from file)");
  } catch (const std::exception& e) {
    fprintf(stderr, "bpfprof: cannot write the profile: %s\n", e.what());
    return command_exited && status != 0 ? status : 1;
  }
  if (options.open && options.format == OutputFormat::kFirefox)
    run_serve(ServeOptions{options.output_path});
  return status;
}

}  // namespace bpfprof
