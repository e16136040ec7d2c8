#include "userspace/session/collect_loop.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <set>
#include <thread>

#include "symbols/dwarf/unwind_table_cache.h"
#include "symbols/util/read_file.h"
#include "symbols/util/text.h"
#include "userspace/capture/process_contexts.h"
#include "userspace/model/clocks.h"
#include "userspace/model/session_model.h"
#include "userspace/session/freed_memory.h"
#include "userspace/session/proc_snapshot.h"
#include "userspace/session/signals.h"

namespace bpfprof {

namespace {

// The C library bpfprof runs on, by its path in /proc/self/maps: the file the programs it
// records map too (a container's own libc is another file, not probed).
std::string own_libc_path() {
  const auto maps = read_entire_file("/proc/self/maps");
  for (std::string_view line : split(maps.value_or(""), '\n')) {
    const size_t path = line.find('/');
    if (path != std::string_view::npos && line.ends_with("/libc.so.6"))
      return std::string(line.substr(path));
  }
  throw std::runtime_error("--allocations: cannot find the C library in /proc/self/maps");
}

constexpr int kReaderNiceBoost = 5;

// Thread `tid`'s nice value `boost` below what it is (0: the calling thread).
void raise_priority(pid_t tid, int boost) {
  errno = 0;
  if (const int nice_now = getpriority(PRIO_PROCESS, static_cast<id_t>(tid)); errno == 0)
    setpriority(PRIO_PROCESS, static_cast<id_t>(tid), std::max(-20, nice_now - boost));
}

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
// A runtime's frames are named from its process's memory when its stacks are read (runtimes/):
// the later, the more of what they point to is gone (V8's young objects moved, the methods of
// a JVM that exited).
constexpr int kRuntimePollMs = 50;
// A runtime's process found but not yet ready to be read (a JVM starting): its samples have the
// interpreter's frames until it is, so it is tried again soon (runtimes/runtime.h, setting_up).
constexpr int kRuntimeSetUpPollMs = 10;

// Unwind-table rows the kernel holds (4 bytes each: bpf/unwind_table.h): room at the start and
// the most the array grows to, in chunks of 1 Mi rows. A command's program and libraries take
// a chunk or a few (libc and ld.so 31 k rows, python and its libraries 0.3 Mi, clang++ with
// libLLVM and libclang-cpp 2.5 Mi); a whole machine of this one's kind (Chromium, a JVM,
// node, Go, clang++) 4.2 Mi. The bounds hold twice that or more.
constexpr uint32_t kUnwindInitialRows = 1u << 20;
constexpr uint32_t kSystemWideUnwindInitialRows = 4u << 20;
constexpr uint32_t kUnwindRowCapacity = 8u << 20;
constexpr uint32_t kSystemWideUnwindRowCapacity = 16u << 20;

Recording recording_for(const RecordOptions& options) {
  Recording recording;
  recording.frequency_hz = options.frequency_hz;
  recording.off_cpu = options.off_cpu.value_or(!options.system_wide);
  recording.record_wakers = recording.off_cpu && options.wakers;
  recording.record_memory = options.memory || options.allocation_period;
  recording.allocation_period = options.allocation_period;
  recording.recorder_context = read_process_context(Pid{getpid()}).value_or(ProcessContext{});
  if (options.wake_threshold_ms)
    recording.wake_threshold_ns = static_cast<uint64_t>(*options.wake_threshold_ms * 1e6);
  recording.call_graph = options.call_graph;
  recording.fixed_stack_copy_size = options.fixed_stack_copy_size;
  return recording;
}

// Runtimes whose frames stay native, as the options say.
std::set<RuntimeKind> runtimes_not_read(const RecordOptions& options) {
  if (options.python_frames) return {};
  return {RuntimeKind::kPython};
}

}  // namespace

// The ring holds the events of a burst while userspace is away. It is mapped twice and all of
// it is resident: with stacks walked in the kernel (a few hundred bytes a sample) 2 MB a CPU,
// 4 to 16 MB; with every stack copied (~25 KB a sample) 16 MB.
uint32_t default_ring_buffer_bytes(CallGraph call_graph, uint32_t cpus) {
  constexpr uint32_t kMin = 4u << 20, kMax = 16u << 20;
  if (call_graph == CallGraph::kDwarfCopy) return kMax;
  return std::clamp(std::bit_ceil(std::min(cpus, kMax >> 21) << 21), kMin, kMax);
}

namespace {

BpfPrograms::Config bpf_config(const RecordOptions& options, const Recording& recording) {
  return BpfPrograms::Config{
      .track_all_processes = options.system_wide,
      .record_off_cpu = recording.off_cpu,
      .sampling_interval_ns = 1000000000ull / options.frequency_hz,
      .user_stack_copy_bytes = options.user_stack_copy_bytes,
      .fallback_copies_whole_stack =
          options.call_graph == CallGraph::kDwarf && !options.fixed_stack_copy_size,
      .ring_buffer_bytes = options.ring_buffer_bytes.value_or(default_ring_buffer_bytes(
          options.call_graph, static_cast<uint32_t>(std::max(1L, sysconf(_SC_NPROCESSORS_CONF))))),
      .unwind_row_capacity = options.call_graph != CallGraph::kDwarf ? 0
                             : options.system_wide                   ? kSystemWideUnwindRowCapacity
                                                                     : kUnwindRowCapacity,
      .unwind_initial_rows =
          options.system_wide ? kSystemWideUnwindInitialRows : kUnwindInitialRows,
      .record_wakers = recording.record_wakers,
      .record_memory = recording.record_memory,
      .allocation_period = recording.allocation_period,
      .max_tracked_processes = options.max_processes,
      .thread_cache_entries = options.command.empty() ? BpfPrograms::Config::kManyThreads
                                                      : BpfPrograms::Config::kCommandThreads,
      .cgroup_filters = static_cast<uint32_t>(options.cgroup_paths.size()),
      // Targets that run already may be a runtime's: their frames from the first sample on.
      .runtime_readers_later =
          !options.command.empty() && !recording.record_memory && recording.allocation_period == 0};
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

}  // namespace

CollectLoop::CollectLoop(const RecordOptions& options, MonotonicNs invoked)
    : options_(options),
      figures_{.invoked = invoked},
      recording_(recording_for(options)),
      pipeline_(recording_, {.dwarf = uses_dwarf(options.call_graph),
                             .collapse_repeated_samples = !options.no_collapse,
                             .runtime_frames = true,
                             .runtimes_not_read = runtimes_not_read(options)}),
      targets_(options),
      show_status_(isatty(STDERR_FILENO) == 1) {}

void CollectLoop::start_sampling() {
  // From here on above the default priority (the command was forked before and keeps its
  // own): the verifier's work for the programs runs in this process's threads, and on a busy
  // machine it is the start-up a user waits for. Threads made later (loaders, table workers)
  // inherit it. The reader must also keep up with the ring buffer when every CPU is busy: at
  // the default priority, among dozens of runnable threads, it gets too little CPU and events
  // are lost.
  raise_priority(0, kReaderNiceBoost);
  bpf_.emplace(bpf_config(options_, recording_));
  figures_.bpf_load = bpf_->load_times();
  if (options_.call_graph == CallGraph::kDwarf) start_kernel_unwinding();
  std::vector<int> cpus = online_cpus();
  side_band_.emplace(cpus);
  // The side band first: it notes when the read began, and the forks and execs before that
  // are in their ring by then.
  pipeline_.read_lifecycle_with([this] {
    drain_side_band();
    bpf_->read_lifecycle_ring();
  });
  pipeline_.observe_lifecycle_events(
      [this](const std::vector<LifecycleEvent>& events, size_t from) {
        if (kernel_unwind_) kernel_unwind_->apply(events, from);
        // Read from /proc by the pipeline: not in the BPF events the log keeps raw.
        if (event_log_) event_log_->write_lifecycle_events<ProcessContextEvent>(events, from);
      });
  if (!options_.fixed_stack_copy_size) bpf_->adapt_stack_copies(pipeline_);
  bpf_->attach_lifecycle();
  sampling_ = open_sampling_events(options_.frequency_hz, cpus);
  recording_.sampling_event = sampling_.event_name;
  // Page faults say where memory grows; with --allocations, the allocator's calls say it.
  if (recording_.record_memory && !recording_.allocation_period)
    open_page_fault_events(cpus, sampling_);
  if (recording_.allocation_period) bpf_->attach_allocator_probes(own_libc_path());
  // -p and -a: once their processes are known (start_targets). Sampled while /proc is read and
  // tables are loaded, a busy machine's samples would all fall back to stack copies that fill
  // the ring while it is not read, and events would be lost.
  if (targets_.launched()) attach_sampling();
  install_stop_signal_handlers();
  release_freed_memory();  // the kernel's BTF, parsed to load the programs
}

void CollectLoop::attach_sampling() {
  bpf_->attach_sampling(sampling_);
  figures_.sampling_started = monotonic_now();
}

// Tables for the files the tracked processes map, built (or read from their cache) on a
// worker thread as the mappings arrive, and the processes' mappings, into the BPF maps.
void CollectLoop::start_kernel_unwinding() {
  // Tables are built on a worker per CPU (up to 4): a command's libLLVM, Chromium or JVM
  // maps many at once, each up to a second to build, and their samples fall back meanwhile.
  // -a builds only those its stacks need. A cache object per table: it is not thread-safe, and
  // costs nothing to make.
  const unsigned workers = std::clamp(std::thread::hardware_concurrency(), 1u, 4u);
  kernel_unwind_.emplace(
      *bpf_->unwind_maps(),
      [directory = UnwindTableCache::default_directory(),
       options = UnwindTableOptions{options_.symbol_dirs}](const std::string& path,
                                                           OnCacheMiss miss) {
        return UnwindTableCache(directory, options).get(path, -1, miss, TableForm::kCompactFirst);
      },
      options_.system_wide, workers,
      options_.system_wide ? TableBuilds::kWhenAStackNeedsThem : TableBuilds::kEveryMappedFile);
  pipeline_.decoder().observe_copied_stacks([this](Pid pid, const std::vector<uint64_t>& pcs) {
    if (kernel_unwind_) kernel_unwind_->prefer(pid, pcs);
  });
}

void CollectLoop::start_clock() {
  recording_.start_time = monotonic_now();
  figures_.own_cpu_at_start_ms = process_cpu_ms();
  recording_.start_wall_clock_ms = wall_clock_ms_at(recording_.start_time);
  open_event_log();
}

void CollectLoop::open_event_log() {
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

void CollectLoop::start_targets() {
  try {
    targets_.start(*bpf_, kernel_unwind_ ? &*kernel_unwind_ : nullptr, recording_);
  } catch (const RecordFailure&) {
    throw;
  } catch (const std::exception& e) {
    throw RecordFailure(2, e.what());
  }
  figures_.targets_known = monotonic_now();
  // Lifecycle events from the side band and /proc go to the event log as they are (the BPF
  // programs' events are saved raw as they are read).
  if (event_log_) event_log_->write_lifecycle_events(recording_.events, 0);
  pipeline_.take_lifecycle_events();
  if (recording_.record_memory) record_existing_memory();
  bpf_->apply_runtime_changes(pipeline_);  // interpreters already running: their frames now
  if (!targets_.launched()) {
    // Their mappings, walked from the first sample; an entry the kernel wrote since the
    // snapshot began (an exec) is newer and stays.
    if (kernel_unwind_) kernel_unwind_->flush(recording_.start_time);
    attach_sampling();
    say_sampling_started();
  }
  if (options_.duration_seconds)
    deadline_ = MonotonicNs{figures_.sampling_started.value +
                            static_cast<uint64_t>(*options_.duration_seconds * 1e9)};
}

// --memory with -p and -a: the processes found have their resident memory from the start;
// the kernel side sends it only as it changes.
void CollectLoop::record_existing_memory() {
  const MonotonicNs now = monotonic_now();
  for (const LifecycleEvent& event : recording_.events) {
    const auto* existing = std::get_if<ExistingProcessEvent>(&event.payload);
    if (!existing) continue;
    std::vector<MemorySample>& series = recording_.memory[existing->pid];
    if (!series.empty()) continue;
    if (const std::optional<uint64_t> bytes = resident_bytes_now(existing->pid))
      series.push_back(MemorySample{now, *bytes, 0, 0});
  }
}

// -p and -a: what runs from now on is in the profile (the set-up before it is not).
void CollectLoop::say_sampling_started() const {
  const size_t cgroups = options_.cgroup_paths.size();
  const std::string what =
      options_.system_wide ? std::string("every process")
      : cgroups
          ? "the processes of " + std::to_string(cgroups) + (cgroups == 1 ? " cgroup" : " cgroups")
          : std::to_string(options_.attach_pids.size()) +
                (options_.attach_pids.size() == 1 ? " process" : " processes");
  char until[64] = "";
  if (options_.duration_seconds)
    snprintf(until, sizeof until, " for %g s", *options_.duration_seconds);
  fprintf(stderr, "bpfprof: sampling %s from now%s; Ctrl-C ends the recording\n", what.c_str(),
          until);
}

// Also tells the pipeline from when the lifecycle sources are read: the BPF lifecycle ring
// is read after this (in consume(), or by the pipeline's lifecycle read).
void CollectLoop::drain_side_band() {
  if (!side_band_) return;  // released once everything was read
  const MonotonicNs read_start = monotonic_now();
  const size_t before = recording_.events.size();
  side_band_->drain(recording_.events);
  if (event_log_) event_log_->write_lifecycle_events(recording_.events, before);
  pipeline_.lifecycle_read_until(read_start);
}

void CollectLoop::note_losses() {
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

void CollectLoop::collect(PeriodicOutputDriver& periodic) {
  next_status_ = MonotonicNs{recording_.start_time.value + 1000000000};
  while (step(periodic)) {
  }
  recording_.end_time = monotonic_now();
  if (show_status_) fputs("\r\033[K", stderr);
  figures_.own_cpu_while_recording_ms = process_cpu_ms() - figures_.own_cpu_at_start_ms;
  bpf_->take_full_walkers(true);
  figures_.bpf_load.full_walkers_ms = bpf_->load_times().full_walkers_ms;
  stop_collecting();
}

void CollectLoop::show_status() {
  if (!show_status_ || monotonic_now() < next_status_) return;
  print_status_line(recording_, pipeline_.model(),
                    bpf_->lost_events() + side_band_->lost_records());
  next_status_.value += 1000000000;
}

bool CollectLoop::step(PeriodicOutputDriver& periodic) {
  show_status();
  bpf_->wait(read_interval_ms(monotonic_now(), periodic), targets_.running_fds());
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
  periodic.advance(all_read_before);
  if (!handle_stop_signals()) return false;
  periodic.say_unused_dump_request();
  if (targets_.ended()) return false;
  return monotonic_now() < deadline_;
}

int CollectLoop::read_interval_ms(MonotonicNs now, const PeriodicOutputDriver& periodic) {
  // Until a new process's mappings and tables are in the kernel its samples fall back to
  // stack copies: read sooner while a process is new (the BPF side wakes the reader at its
  // fork or exec). Otherwise seldom: on a busy machine every wakeup preempts a profiled
  // thread, and costs CPU.
  if (kernel_unwind_ && kernel_unwind_->settling(now)) return kSettlingPollMs;
  if (pipeline_.runtimes().setting_up()) return kRuntimeSetUpPollMs;
  // Every sample a stack copy (dwarf-copy): the ring fills many times faster, and a process's
  // first batch decides how large its copies must be (stacks cut before that stay cut).
  if (uses_dwarf(options_.call_graph) && !kernel_unwind_) return kCopyPollMs;
  // Fallback copies since the last read: a table waits to be loaded (a library just mapped).
  const uint64_t copies =
      recording_.stats.on_cpu_stacks.copied + recording_.stats.off_cpu_stacks.copied;
  const bool fell_back = copies != stack_copies_read_;
  stack_copies_read_ = copies;
  if (bpf_->runtime_processes_known()) return kRuntimePollMs;
  if (!kernel_unwind_ || fell_back || periodic.active() || show_status_) return kPollMs;
  if (deadline_.value == UINT64_MAX) return kQuietPollMs;
  const uint64_t left_ms =
      deadline_.value > now.value ? (deadline_.value - now.value) / 1000000 : 0;
  return static_cast<int>(std::clamp<uint64_t>(left_ms + 1, 1, kQuietPollMs));
}

// False when a signal ends the recording.
bool CollectLoop::handle_stop_signals() {
  const StopSignals signals = stop_signals();
  for (; handled_signals_ < signals.count; ++handled_signals_) {
    // A terminal's Ctrl-C already reached the command (same process group); a signal sent
    // to bpfprof alone is passed on, so the command can end and the profile be written.
    if (signals.from_a_process) targets_.pass_on(signals.last);
  }
  if (handled_signals_ > 0 && !targets_.launched()) {
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
void CollectLoop::stop_collecting() {
  bpf_->detach_sampling();
  sampling_.fds.clear();
  sampling_.page_fault_fds.clear();
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
  save_trailer();
  release_capture();
}

// Everything is read: the ring buffers and the maps mapped here, the unwind tables and the side
// band go before the profile is written, which needs the most memory (symbols, debug
// information) of the whole run. The programs stay loaded, detached, until then: kallsyms names
// their code in the stacks taken from inside them, which the profile leaves out by those names.
void CollectLoop::release_capture() {
  kernel_unwind_.reset();  // it writes bpf_'s maps
  side_band_.reset();
  bpf_->release_buffers();
  release_freed_memory();
}

// --save-events: the stream ends with what was lost.
void CollectLoop::save_trailer() {
  if (!event_log_) return;
  bpf_->save_events_to(nullptr);
  try {
    const RecordingStats& stats = recording_.stats;
    event_log_->finish(
        RecordingTrailer{recording_.end_time, stats.lost_bpf_events, stats.lost_sideband_records});
    fprintf(stderr, "bpfprof: saved %.1f MB of events to %s\n",
            static_cast<double>(event_log_->bytes_written()) / 1e6,
            options_.save_events_path.c_str());
  } catch (const std::exception& e) {
    fprintf(stderr, "bpfprof: %s\n", e.what());
  }
}

int CollectLoop::exit_status() const {
  return targets_.command_exited() ? targets_.command_status()
         : stop_signal_            ? 128 + stop_signal_
                                   : 0;
}

int CollectLoop::failed_status() const {
  const int status = exit_status();
  return targets_.command_exited() && status != 0 ? status : 1;
}

}  // namespace bpfprof
