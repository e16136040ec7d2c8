// The session model: processes and threads over time, their address spaces, and each
// thread's samples with stacks resolved to (library, offset) frames. Built by replaying a
// Recording's events and samples in timestamp order.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "symbols/util/mapping_ranges.h"
#include "userspace/model/ids.h"
#include "userspace/model/prefix_tree.h"
#include "userspace/model/recording.h"
#include "userspace/model/thread_accounting.h"
#include "userspace/model/thread_waits.h"

namespace bpfprof {

// The library of kernel frames (the first library of every model).
inline constexpr LibId kKernelLib{0};

// What a frame of a resolved stack is; the kind decides what its library and address mean,
// so that no library id doubles as a marker.
enum class FrameKind : uint8_t {
  kNative,       // code in a mapped file or a process's [anon] memory: `lib`, file offset
  kKernel,       // kernel code: `lib` is kKernelLib, the address is absolute
  kUnmapped,     // a user address outside any executable mapping (often a frame-pointer walk
                 // gone astray): absolute, no library
  kOffCpuState,  // a pseudo-frame naming why the thread is off the CPU (off_cpu_state())
  kTruncated,    // the pseudo-frame the profile writer puts at the root of a user stack that
                 // does not reach a thread root (the model never makes one itself)
  kRuntime,      // a runtime's function at a line (Python, ...): the address is the
                 // recording's RuntimeFrameId
  kExec,         // the root of a sample taken inside execve once the old image was gone:
                 // there is no user stack (kExecRawFrame)
};

struct Library {
  std::string path{};  // as the kernel reported it
  uint32_t dev_major = 0;
  uint32_t dev_minor = 0;
  uint64_t inode = 0;
  std::string build_id{};        // raw bytes, when reported with the mapping
  uint64_t mount_namespace = 0;  // non-zero: the path is another mount namespace's
  HeldFileRef held_file{};       // the file held open, when `path` may not lead to it

  // Set for the "[anon]" library of a process: its anonymous executable memory (JIT code),
  // named through the process's /tmp/perf-PID.map if it writes one.
  std::optional<Pid> anonymous_memory_of{};

  const std::string& readable_path() const { return bpfprof::readable_path(path, held_file); }
};

// One frame before symbolization. For a library, `address` is the offset in the file;
// for the kernel and for addresses outside any mapping it is the absolute address.
// Return addresses are already nudged (minus one) into their call instruction.
struct FrameKey {
  FrameKind kind = FrameKind::kUnmapped;
  LibId lib{};  // meaningful for kNative and kKernel only
  uint64_t address = 0;

  static constexpr FrameKey native(LibId lib, uint64_t file_offset) {
    return {FrameKind::kNative, lib, file_offset};
  }
  static constexpr FrameKey kernel(uint64_t address) {
    return {FrameKind::kKernel, kKernelLib, address};
  }
  static constexpr FrameKey unmapped(uint64_t address) {
    return {FrameKind::kUnmapped, LibId{}, address};
  }
  static constexpr FrameKey off_cpu(OffCpuState state) {
    return {FrameKind::kOffCpuState, LibId{}, static_cast<uint64_t>(state)};
  }
  static constexpr FrameKey truncated() { return {FrameKind::kTruncated, LibId{}, 0}; }
  static constexpr FrameKey exec() { return {FrameKind::kExec, LibId{}, 0}; }
  static constexpr FrameKey runtime(RuntimeFrameId frame) {
    return {FrameKind::kRuntime, LibId{}, frame.value};
  }

  bool is_off_cpu_state() const { return kind == FrameKind::kOffCpuState; }
  OffCpuState off_cpu_state() const { return static_cast<OffCpuState>(address); }
  RuntimeFrameId runtime_frame() const { return RuntimeFrameId{static_cast<uint32_t>(address)}; }
  bool operator==(const FrameKey&) const = default;
};
struct FrameKeyHash {
  size_t operator()(const FrameKey& k) const noexcept {
    const uint64_t tag = static_cast<uint64_t>(k.kind) << 32 | static_cast<uint32_t>(k.lib.value);
    return std::hash<uint64_t>{}(k.address * 31 + tag);
  }
};
using ResolvedStackTree = PrefixTree<FrameKey, FrameKeyHash>;
static_assert(std::is_same_v<StackId, ResolvedStackTree::NodeId>);

struct Mapping {
  uint64_t start = 0;
  uint64_t end = 0;
  uint64_t file_offset = 0;
  LibId lib;
};

// The executable mappings of one process at the current replay time.
using AddressSpace = AddressSpaceOf<Mapping>;

// A wait that a waking ended, at least the wake threshold long: from the switch-out to the
// waking (the time the thread then waited for a CPU is not the waker's doing).
struct WokenWait {
  MonotonicNs start;
  MonotonicNs woken;
  OffCpuState state = OffCpuState::kSleeping;
  WakerId waker;
  std::optional<ProcessIndex> waker_process;  // the waker's process entry, if tracked
  std::optional<StackId> cause;               // the waker's stack, if taken
};

// Per process: the waiting time each waker ended (every woken wait, however short).
struct WakerShare {
  uint64_t waited_ns = 0;
  uint64_t wakings = 0;
};

// A process's waker shares of the waits woken within one second (SessionModel::
// keep_wakers_by_second).
struct WakerSecond {
  uint64_t second = 0;  // MonotonicNs / 1e9
  std::unordered_map<WakerId, WakerShare> wakers;
  std::unordered_map<StackId, WakerShare> interrupt_wakers;
};

// A thread's identity and its samples; how the samples are made from its events is its
// accounting's business.
struct Thread {
  Tid tid;
  ProcessIndex process;
  std::string name;
  MonotonicNs start;
  std::optional<MonotonicNs> end;
  std::optional<CpuTimeNs> final_cpu_time;  // the runtime at exit
  std::vector<ThreadSample> samples;
  ThreadAccounting accounting{MonotonicNs{0}, std::nullopt};
  ThreadWaits waits;
  std::vector<WokenWait> woken_waits;  // the waits a waking ended, at least the threshold long
};

struct Process {
  Pid pid;
  std::string name;        // executable's base name, else the main thread's comm
  std::string executable;  // path from exec, empty if unknown
  MonotonicNs start;
  std::optional<MonotonicNs> end;
  std::optional<int> exit_code;
  std::vector<ThreadIndex> threads;
  std::optional<uint32_t> euid;  // its effective user when it started, where known
  // The profiler's own child between fork and the exec of the launched command: its
  // samples are the profiler's, not the user's, and it is left out of the profile.
  bool is_launcher = false;
  // Made up for an event of a pid not known yet ("pid N"): a /proc snapshot of that pid
  // taken afterwards describes this same process (-a, -p), not a new one.
  bool implicit = false;
  std::unordered_map<WakerId, WakerShare> wakers;  // which threads ended its threads' waits
  // The waits interrupts ended, by the interrupt's stack (which says what it was: a timer,
  // a device); kRoot for those whose stack was not taken.
  std::unordered_map<StackId, WakerShare> interrupt_wakers;
  // The same by second, oldest first, with a sliding window only: what falls out of the
  // window leaves the totals above.
  std::deque<WakerSecond> waker_seconds;
};

class SessionModel {
 public:
  SessionModel();

  // Replays everything in timestamp order, then finish(). May be called once.
  void replay(const Recording& recording);
  // Closes what is still open at `end` (off-CPU intervals), and gives each thread's
  // remaining CPU time to its last sample.
  void finish(MonotonicNs end);

  // The sampling interval (off-CPU weights are in its units) and whether switch-in events
  // come (off-CPU recording) or a switch-out is a mere marker.
  void configure(uint64_t interval_ns, bool off_cpu) {
    rules_.interval_ns = interval_ns;
    rules_.off_cpu = off_cpu;
  }
  void configure_for(const Recording& recording);
  // Consecutive identical timer samples of a thread become one sample with their summed
  // weight and CPU time (on by default).
  void set_collapse_repeated_samples(bool collapse) { rules_.collapse_repeated_samples = collapse; }
  // Waits a waking ended get a WokenWait when they lasted at least this (0: one interval).
  void set_wake_threshold(uint64_t ns) { wake_threshold_ns_ = ns; }
  uint64_t wake_threshold_ns() const {
    return wake_threshold_ns_ ? wake_threshold_ns_ : rules_.interval_ns;
  }
  // The wakers that WokenWait and WakerShare name (a copy of the recording's table).
  const WakerTable& wakers() const { return wakers_; }

  // Applies the recording's events and samples up to `until`, in time order, and removes
  // them from `recording`: a live recording calls it as it goes, so memory holds the recent
  // samples and the model, not every raw sample. configure_for() first.
  void consume(Recording& recording, MonotonicNs until);

  // Drops the threads' samples older than `t` (a rotating output wrote them; a flight
  // recorder keeps only the recent ones), so memory holds the samples of one period. A
  // collapsed run or a wait that began before `t` keeps its part from `t` on
  // (sample_part_from). The woken waits that ended before `t` go too.
  void drop_samples_before(MonotonicNs t);
  // Processes and threads that ended before `t` and hold nothing any more (no samples, no
  // woken waits) leave the model; the others are renumbered. A rotating output's memory
  // then does not grow with every process a long run ever saw, and a period's file does not
  // list the processes of the periods before.
  void forget_ended_before(MonotonicNs t);
  // The processes' waker totals (the summary's top wakers) start again: for a new period.
  void clear_waker_totals();
  // A sliding window (--flight-recorder): the waker totals keep their shares by second, and
  // drop_samples_before(t) takes out the seconds that ended by t.
  void keep_wakers_by_second() { wakers_by_second_ = true; }
  // New stack trees with only the stacks still in use: the model's (threads' samples, open
  // waits) and the recording's raw ones (samples not yet taken). Without it a long run's
  // trees grow by every new stack it ever met (~7,000 a second with -a on a busy machine);
  // a rotating output calls it after dropping what it wrote.
  // `other_raw_stacks` is given the function that moves a raw stack id, for the raw ids
  // held outside the recording (the decoder's last waker stacks).
  using RawStackMove = std::function<RawStackId(RawStackId)>;
  void compact_stacks(Recording& recording,
                      const std::function<void(const RawStackMove&)>& other_raw_stacks = {});
  // The raw half of it alone, for any long recording: a new raw tree with only the raw
  // stacks of samples not yet taken (and those `other_raw_stacks` moves). Once a sample is
  // resolved its raw stack is of no use, and raw addresses differ in every process: a -a
  // run with compilers starting all the time adds raw nodes with almost every sample.
  void compact_raw_stacks(Recording& recording,
                          const std::function<void(const RawStackMove&)>& other_raw_stacks = {});

  const std::vector<Process>& processes() const { return processes_; }
  const std::vector<Thread>& threads() const { return threads_; }
  const std::vector<Library>& libraries() const { return libraries_; }
  const ResolvedStackTree& stacks() const { return stacks_; }
  const Library& library(LibId id) const { return libraries_[static_cast<size_t>(id.value)]; }

  // Threads ordered for display: by process start time, each process's main thread first.
  std::vector<ThreadIndex> display_order() const;

  // Individual steps, public so that tests can drive the model without a recording.
  void apply(MonotonicNs time, const LifecyclePayload& event);
  void add_sample(const SampleRecord& sample, const RawStackTree& raw_stacks);

 private:
  void on(MonotonicNs t, const ForkEvent& e);
  void on(MonotonicNs t, const ExecEvent& e);
  void on(MonotonicNs t, const ExitEvent& e);
  void on(MonotonicNs t, const CommEvent& e);
  void on(MonotonicNs t, const MmapEvent& e);
  void on(MonotonicNs t, const AddressSpaceResetEvent& e);
  void on(MonotonicNs t, const ProcessStartEvent& e);
  void on(MonotonicNs t, const ExistingProcessEvent& e);

  ProcessIndex start_process(MonotonicNs t, Pid pid, std::string name, std::string executable);
  // `runtime`: the thread's runtime now, if known (see ThreadAccounting).
  ThreadIndex start_thread(MonotonicNs t, ProcessIndex process, Tid tid, std::string name,
                           std::optional<CpuTimeNs> runtime);
  void end_process(MonotonicNs t, ProcessIndex process);
  ProcessIndex live_process(MonotonicNs t, Pid pid);
  void adopt_snapshot(MonotonicNs t, ProcessIndex index,
                      const ExistingProcessEvent& e);  // creates an entry if none is live
  ThreadIndex live_thread(MonotonicNs t, Pid pid, Tid tid);
  LibId intern_library(const MappingInfo& mapping);
  LibId anonymous_library(Pid pid);
  StackId resolve(Pid pid, RawStackId raw, const RawStackTree& raw_stacks);
  StackId resolve_uncached(Pid pid, const AddressSpace* space, RawStackId raw,
                           const RawStackTree& raw_stacks);
  StackId off_cpu_stack(Thread& th, const SampleRecord& switch_out, const RawStackTree& raw_stacks);
  void note_waking(Thread& th, const SampleRecord& waking, const RawStackTree& raw_stacks);
  // The thread's wait (if one is open) ends at t: matched with the waking that ended it.
  std::optional<ThreadWaits::EndedWait> end_wait(Thread& th, MonotonicNs t);
  std::optional<ThreadAccounting::Runnable> runnable_after(
      const Thread& th, const std::optional<ThreadWaits::EndedWait>& ended, MonotonicNs t);
  void take_wakers(const WakerTable& table);

  Process& process(ProcessIndex i) { return processes_[i.value]; }
  Thread& thread(ThreadIndex i) { return threads_[i.value]; }

  std::vector<Process> processes_;
  std::vector<Thread> threads_;
  std::vector<Library> libraries_;
  std::map<std::tuple<std::string, uint64_t, std::string, uint32_t, uint32_t, uint64_t>, LibId>
      library_index_;
  std::unordered_map<Pid, LibId> anonymous_libraries_;
  std::unordered_map<Pid, ProcessIndex> live_processes_;
  std::unordered_map<Tid, ThreadIndex> live_threads_;
  // Threads whose exit was seen: a task still samples on its way out after the exit
  // tracepoint, and those samples are its own.
  std::unordered_map<Tid, ThreadIndex> exited_threads_;
  std::unordered_map<Pid, AddressSpace> address_spaces_;
  // The last processes to exit, newest last: their last task samples on its way out after
  // the exit tracepoint too, with its mappings still in place (kept: kExitedSpacesKept).
  std::deque<std::pair<Pid, AddressSpace>> exited_address_spaces_;
  const AddressSpace* address_space_of(Pid pid) const;
  ResolvedStackTree stacks_;
  // Raw stacks already resolved in a process, with the address-space version they used.
  struct ResolvedStack {
    uint64_t address_space_version;
    StackId stack;
  };
  std::unordered_map<uint64_t, ResolvedStack> resolved_;  // by pid << 32 | raw stack
  // The same for raw stacks as the callers of others (their frames all return addresses):
  // the leaves of a loop differ from sample to sample, their callers do not.
  std::unordered_map<uint64_t, ResolvedStack> resolved_callers_;
  std::vector<uint64_t> scratch_exact_;  // resolve_uncached's, kept for their capacity
  std::vector<RawStackId> scratch_callers_;
  AccountingRules rules_;
  uint64_t wake_threshold_ns_ = 0;
  bool wakers_by_second_ = false;
  WakerTable wakers_;
  // consume(): how much of the recording's pending events and samples is already in order.
  size_t sorted_pending_events_ = 0;
  size_t sorted_pending_samples_ = 0;
  std::optional<MonotonicNs> taken_until_;  // the last `until` of consume()
};

}  // namespace bpfprof
