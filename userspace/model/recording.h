// What a recording collects before it is turned into the session model: lifecycle and
// mapping events, and samples whose raw stacks are interned as they arrive.
#pragma once

#include <cstdint>
#include <deque>
#include <iterator>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <variant>
#include <vector>

#include "bpf/events.h"
#include "symbols/util/held_file.h"
#include "userspace/model/ids.h"
#include "userspace/model/prefix_tree.h"
#include "userspace/model/process_context.h"

namespace bpfprof {

// Raw stacks: absolute instruction addresses, root (outermost user frame) to leaf
// (innermost kernel frame). Kernel and user addresses are told apart by their range.
using RawStackTree = PrefixTree<uint64_t>;
using RawStackId = RawStackTree::NodeId;

inline bool is_kernel_address(uint64_t address) { return (address >> 63) != 0; }
// Canonical user-space addresses (x86-64 with 5-level paging, arm64): below 2^56.
inline bool is_user_address(uint64_t address) { return address < (uint64_t{1} << 56); }

// The language runtimes whose own frames bpfprof reads (runtimes/<name>/, listed in
// bpf/runtime_list.h); each has its category in the profile. The values index the BPF
// side's per-runtime globals.
enum class RuntimeKind : uint8_t {
#define BPFPROF_RUNTIME_KIND(ID, id, Kind, language, colour, event) k##Kind = BPFPROF_RUNTIME_##ID,
  BPFPROF_RUNTIME_LIST(BPFPROF_RUNTIME_KIND)
#undef BPFPROF_RUNTIME_KIND
};
// What bpf/runtime_list.h says of a runtime.
struct RuntimeDescription {
  RuntimeKind kind;
  const char* language;  // its name in the summary and its frames' category in the profile
  const char* colour;    // that category's colour
  uint32_t event_kind;   // its frames' event kind (enum bpfprof_event_kind)
};
inline constexpr RuntimeDescription kRuntimeDescriptions[] = {
#define BPFPROF_RUNTIME_DESCRIPTION(ID, id, Kind, language, colour, event) \
  {RuntimeKind::k##Kind, language, colour, BPFPROF_EVENT_##ID##_STACK},
    BPFPROF_RUNTIME_LIST(BPFPROF_RUNTIME_DESCRIPTION)
#undef BPFPROF_RUNTIME_DESCRIPTION
};
static_assert(std::size(kRuntimeDescriptions) == BPFPROF_RUNTIMES);
inline const RuntimeDescription& runtime_description(RuntimeKind runtime) {
  return kRuntimeDescriptions[static_cast<size_t>(runtime)];
}
std::string_view runtime_name(RuntimeKind runtime);
std::set<RuntimeKind> all_runtimes();

// A frame of a runtime's program (a Python function, ...) and the line it was at.
using RuntimeFrameId = StrongId<struct RuntimeFrameIdTag, uint32_t>;
struct RuntimeFunction {
  std::string qualified_name;  // as the runtime names it: "Grove.tend", "main.<locals>.leaf"
  std::string filename;        // the source file
  uint32_t first_line = 0;     // the function's first line
  RuntimeKind runtime = RuntimeKind::kPython;
  bool operator==(const RuntimeFunction&) const = default;
};
struct RuntimeFrame {
  uint32_t function = 0;  // index into RuntimeFrameTable::functions()
  uint32_t line = 0;      // the line of the instruction the frame was at; 0: unknown
};

// The runtime frames of a recording, each (function, line) once. Raw stacks hold them as
// addresses of a range of their own, non-canonical for user and kernel code alike
// (2^60 + id): the same way kernel and user frames are told apart.
class RuntimeFrameTable {
 public:
  RuntimeFrameId intern(const RuntimeFunction& function, uint32_t line);
  // A function read before its first line could be (its source being moved by the collector):
  // a frame of its own, shared with no other function of that name, until complete() gives
  // it what a later read found. The stacks already holding it then show that.
  RuntimeFrameId intern_provisional(const RuntimeFunction& function);
  RuntimeFrameId complete(RuntimeFrameId provisional, const RuntimeFunction& function,
                          uint32_t line);
  // At the end: a function still without its first line (provisional, and never reread at the
  // same address: the collector moved it) gets the one of the function of its runtime, file
  // and name that has one, when there is exactly one such.
  void settle_first_lines();
  const RuntimeFrame& frame(RuntimeFrameId id) const { return frames_[id.value]; }
  const RuntimeFunction& function_of(RuntimeFrameId id) const {
    return functions_[frames_[id.value].function];
  }
  size_t size() const { return frames_.size(); }

 private:
  std::vector<RuntimeFunction> functions_;
  std::vector<RuntimeFrame> frames_;
  std::unordered_map<std::string, uint32_t> function_index_;  // by filename:line:name
  std::unordered_map<uint64_t, RuntimeFrameId> frame_index_;  // by function << 32 | line
};

inline constexpr uint64_t kRuntimeRawFrameBase = uint64_t{1} << 60;
// A sample taken inside execve once the old image was gone: no user stack, this raw frame
// instead (BPFPROF_RAW_EXEC_FRAME), the [exec] pseudo-frame in the profile.
inline constexpr uint64_t kExecRawFrame = uint64_t{2} << 60;
inline uint64_t raw_runtime_frame(RuntimeFrameId id) { return kRuntimeRawFrameBase | id.value; }
inline std::optional<RuntimeFrameId> runtime_frame_of(uint64_t raw_address) {
  if ((raw_address >> 32) != (kRuntimeRawFrameBase >> 32)) return std::nullopt;
  return RuntimeFrameId{static_cast<uint32_t>(raw_address)};
}

struct MappingInfo {
  uint64_t start = 0;
  uint64_t length = 0;
  uint64_t file_offset = 0;
  uint32_t dev_major = 0;
  uint32_t dev_minor = 0;
  uint64_t inode = 0;
  std::string path{};
  std::string build_id{};  // raw bytes when the kernel reported it with the mapping
  // For a process in another mount namespace: that namespace (0 when it is bpfprof's own).
  uint64_t mount_namespace = 0;
  // The file, opened while the path still led to it (capture/mapped_files), when the path
  // may not lead to it at the end: another namespace's path, a binary deleted or replaced.
  HeldFileRef held_file{};

  const std::string& readable_path() const { return bpfprof::readable_path(path, held_file); }
  MappedFile file() const { return MappedFile{path, held_file}; }
};

struct ForkEvent {
  Pid parent_pid;
  Tid parent_tid;
  Pid child_pid;
  Tid child_tid;
  std::string child_comm{};
};
struct ExecEvent {
  Pid pid;
  Tid tid;
  Tid old_tid;
  std::string comm{};
  std::string filename{};
  // Who owns the new image (its perf map must be this user's or root's). Not kept in saved
  // event logs: a replay reads perf maps of another time anyway.
  std::optional<uint32_t> euid{};
};
struct ExitEvent {
  Pid pid;
  Tid tid;
  CpuTimeNs cpu_time;
  int exit_code = 0;
  bool group_dead = false;
  std::string comm{};
};
struct CommEvent {
  Pid pid;
  Tid tid;
  std::string comm{};
};
struct MmapEvent {
  Pid pid;
  Tid tid;
  MappingInfo mapping;
};
// The process replaced its address space (exec); reported before the new image's mappings.
struct AddressSpaceResetEvent {
  Pid pid;
  Tid tid;
};
// A process that is already known when the recording starts. `is_launcher`: the
// profiler's own child that will exec the command to profile.
struct ProcessStartEvent {
  Pid pid;
  std::string name{};
  bool is_launcher = false;
};

// A thread of a process that already runs when the recording attaches.
struct ThreadState {
  Tid tid;
  std::string comm{};
  CpuTimeNs cpu_time;  // its runtime so far
};
// A process that already runs when the recording attaches (-p, -a), as /proc showed it.
struct ExistingProcessEvent {
  Pid pid;
  std::string name{};
  std::string executable{};
  std::vector<ThreadState> threads{};
  std::optional<uint32_t> euid{};  // as for ExecEvent
};

// Where a process runs (its container, pod or service), as /proc said after its exec or when
// the recording attached; its children forked later inherit it.
struct ProcessContextEvent {
  Pid pid;
  ProcessContext context{};
};

using LifecyclePayload =
    std::variant<ForkEvent, ExecEvent, ExitEvent, CommEvent, MmapEvent, AddressSpaceResetEvent,
                 ProcessStartEvent, ExistingProcessEvent, ProcessContextEvent>;

// The process that a fork (of a new process), exec, start or attach event makes known: the
// BPF side reports forks and execs of the processes it records only, so these are the ones
// recorded (the side band's mappings cover every process on the machine).
inline std::optional<Pid> process_made_known_by(const LifecyclePayload& payload) {
  if (const auto* fork = std::get_if<ForkEvent>(&payload))
    return fork->child_pid != fork->parent_pid ? std::optional(fork->child_pid) : std::nullopt;
  if (const auto* exec = std::get_if<ExecEvent>(&payload)) return exec->pid;
  if (const auto* start = std::get_if<ProcessStartEvent>(&payload)) return start->pid;
  if (const auto* existing = std::get_if<ExistingProcessEvent>(&payload)) return existing->pid;
  return std::nullopt;
}

struct LifecycleEvent {
  MonotonicNs time;
  LifecyclePayload payload;
};

// Why a thread was off the CPU (values as in bpf/events.h).
enum class OffCpuState : uint8_t { kNone = 0, kSleeping = 1, kIoWait = 2, kWaitingForCpu = 3 };

enum class SampleKind : uint8_t {
  kOnCpu,      // a timer sample of a running thread
  kSwitchOut,  // the thread left the CPU (stack: where it waits, if recorded)
  kSwitchIn,   // the thread runs again
  kWaking,     // something woke the thread (`waker`; stack: the waker's, if taken)
  // record --memory: a page fault of the thread's user code (stack: where), standing for
  // kPageFaultSampleBytes of memory brought in there.
  kPageFault,
  // record --allocations: a sampled call of the C allocator (`allocator_call`: what it did;
  // stack: its caller's).
  kAllocatorCall,
  // record --memory: a sampled system call that grew or shrank the address space
  // (`address_space_call`: what it did; stack: its caller's).
  kAddressSpaceCall,
};

// What a sampled malloc, calloc, realloc, memalign, posix_memalign or free did
// (bpf/allocator_probes.h): the block it allocated (bytes asked for; 0: none sampled) and the
// sampled block it freed (0: none).
struct AllocatorCall {
  uint64_t address = 0;
  uint64_t bytes = 0;
  uint64_t freed_address = 0;
  uint64_t freed_bytes = 0;
};

// The system calls that change an address space (values as in bpf/events.h).
enum class AddressSpaceCallKind : uint8_t { kMmap = 1, kMunmap = 2, kBrk = 3, kMremap = 4 };
// What a sampled address-space call did: by how much the address space grew (< 0: shrank),
// and where (the mapping's start; brk: the heap's end before it moved).
struct AddressSpaceCall {
  AddressSpaceCallKind call = AddressSpaceCallKind::kMmap;
  uint64_t address = 0;
  int64_t change = 0;
};

// What woke a thread: another thread, or an interrupt (values as in bpf/events.h).
// kInterrupt: a hardirq, or a softirq run on the interrupt stack after one.
enum class WakerContext : uint8_t { kThread = 1, kInterrupt = 2 };
struct Waker {
  WakerContext context = WakerContext::kThread;
  Pid pid;  // kThread only: the waking thread, as the kernel named it then
  Tid tid;
  std::string comm{};
  bool operator==(const Waker&) const = default;
};
using WakerId = StrongId<struct WakerIdTag, uint32_t>;

// The wakers of a recording, each once; ids are never reused, so a copy that is only ever
// extended (the model's) stays valid.
class WakerTable {
 public:
  WakerId intern(const Waker& waker);
  const Waker& operator[](WakerId id) const { return wakers_[id.value]; }
  size_t size() const { return wakers_.size(); }

 private:
  std::vector<Waker> wakers_;
  std::unordered_map<std::string, WakerId> index_;  // by context, pid, tid and comm
};

struct SampleRecord {
  MonotonicNs time;
  Pid pid;
  Tid tid;
  Cpu cpu;
  CpuTimeNs cpu_time;  // for kSwitchIn: not known (0)
  RawStackId stack;
  SampleKind kind = SampleKind::kOnCpu;
  OffCpuState off_cpu_state = OffCpuState::kNone;  // for kSwitchOut
  // kSwitchOut: no stack was taken (one was, less than an interval ago); the thread's last
  // off-CPU stack stands for this wait.
  bool reuses_last_stack = false;
  WakerId waker{};                        // kWaking: who (in Recording::wakers); `stack` is theirs
  AllocatorCall allocator_call{};         // kAllocatorCall
  AddressSpaceCall address_space_call{};  // kAddressSpaceCall
};

// Who woke the tracked threads (see userspace/capture/event_decoder.h).
struct WakingStats {
  uint64_t wakings = 0;
  uint64_t stacks_taken = 0;
  // Not taken: the (waker, wakee) pair had one less than an interval ago, reused.
  uint64_t stacks_reused = 0;
  uint64_t user_stacks_skipped = 0;  // wakers in untracked processes: kernel stack only
  uint64_t stacks_missing = 0;       // the stack event did not arrive (ring buffer full)
};

// How one runtime's frames went in a recording (runtimes/<name>/; Python's:
// runtimes/python/stacks.h).
struct RuntimeStats {
  uint64_t stacks = 0;           // samples and off-CPU stacks of interpreters that came with frames
  uint64_t merged = 0;           // of those, stacks whose native interpreter frames were replaced
  uint64_t no_thread_state = 0;  // the thread had no runtime state (starting, ending, C thread)
  uint64_t unreadable = 0;  // a frame unreadable (freed, paged out), a chain mid-switch: cut there
  uint64_t at_limit = 0;    // deeper than the BPF side reads (max_frames)
  uint32_t max_frames = 0;  // how many frames of a stack the BPF side reads
  // Activations left over (or missing) against the native interpreter-loop frames: the native
  // stack was cut short, or the sample caught a call being set up.
  uint64_t mismatched = 0;
  uint64_t frames = 0;          // frames named
  uint64_t unnamed_frames = 0;  // frames whose code object could not be read
  // Processes whose code objects were no longer read: their budget was used up
  // (runtimes/python/code.h).
  uint64_t read_budget_used_up = 0;
  uint64_t code_objects_read = 0;
  uint64_t code_read_ns = 0;  // time spent reading code objects (process_vm_readv, decoding)
  uint64_t interpreters = 0;  // processes whose frames were read
  uint64_t event_bytes = 0;   // ring-buffer bytes of the runtime's stack events
  // An interpreter whose frames were not read, by file: why ("python 3.12: no layout").
  std::map<std::string, std::string> not_read{};
};

// The in-kernel unwinder (--call-graph dwarf): its tables, maps and bounds, and why walks
// fell back to a stack copy.
struct KernelUnwindStats {
  uint64_t tables_built = 0;       // files whose table was built during the recording
  uint64_t tables_from_cache = 0;  // files whose table came from the builder's cache
  uint64_t tables_failed = 0;      // files without a table (unreadable, not ELF)
  // Files whose table the builder gave up on at a bound (symbols/dwarf/unwind_table.h): more
  // rows than it takes, or longer to build. Their samples fall back to stack copies.
  uint64_t tables_past_row_limit = 0;
  uint64_t tables_past_time_limit = 0;
  std::vector<std::string> tables_skipped_files{};  // the first few of those, by path
  double table_ms = 0;            // the workers' CPU time building or reading those tables
  uint64_t rows_loaded = 0;       // rows in use at the end
  uint64_t rules_loaded = 0;      // distinct rules those rows name (bpf/unwind_table.h)
  uint64_t tables_evicted = 0;    // tables dropped for space: no process mapped their file
  uint64_t tables_preferred = 0;  // queued tables built first: a copied stack needed them
  // Files not in the cache that no stack needed, left without a table (TableBuilds, -a).
  uint64_t tables_unbuilt = 0;
  uint32_t row_capacity = 0;                  // rows the array had room for at the end
  uint32_t row_bound = 0;                     // the most it could have grown to
  uint64_t map_bytes = 0;                     // kernel memory of the unwinder's maps
  uint64_t files_over_capacity = 0;           // tables that no longer fit in the row array
  uint64_t processes_over_mapping_limit = 0;  // more executable mappings than the map holds
  uint64_t processes_not_stored = 0;          // the map of processes was full
  // Our entries the BPF side's VMA scan, begun before our write, stored its own over (written
  // again at the next flush).
  uint64_t entries_overwritten_by_kernel = 0;
  std::vector<uint64_t> fallbacks_by_reason{};  // enum bpfprof_unwind_fallback
};

struct StackSources {
  uint64_t kernel = 0;
  uint64_t copied = 0;
  // Of those, the stacks taken a second or more after the first sample: once the tables of
  // the processes running at the start are loaded (-a).
  uint64_t kernel_settled = 0;
  uint64_t copied_settled = 0;
};

struct RecordingStats {
  uint64_t samples = 0;
  MonotonicNs first_sample_time;  // 0 until a timer sample arrives
  uint64_t switch_outs = 0;
  // User stacks taken (walked in the kernel or copied) by timer samples, switch-outs and
  // wakers; a switch-out that reuses its thread's last stack takes none.
  uint64_t user_stacks_taken = 0;
  // Of those, the copies unwound in userspace (DWARF mode: a kernel walk that fell back, or
  // every one with dwarf-copy), their ring-buffer bytes, and their bytes of user stack.
  uint64_t copied_stacks = 0;
  uint64_t copy_event_bytes = 0;
  uint64_t stack_copy_bytes = 0;
  // User stacks of timer samples (on CPU) and of switch-outs (off CPU) by where they were
  // unwound: walked by the kernel to a thread root (no copy), or copied (with kernel
  // unwinding: the walk fell back) and unwound here.
  StackSources on_cpu_stacks;
  StackSources off_cpu_stacks;
  // Of the copies, how many each process's stacks took (on and off CPU): which process the
  // kernel's walks fell back for.
  std::unordered_map<Pid, uint64_t> stack_copies_by_process;
  uint64_t sample_event_bytes = 0;  // ring-buffer bytes of every timer sample
  // record --allocations: the sampled allocator calls, and those whose caller's stack was not
  // taken (a sample interrupted the walk).
  uint64_t allocator_calls = 0;
  uint64_t allocator_calls_without_stack = 0;
  // record --memory: the sampled address-space calls, and those without the caller's stack.
  uint64_t address_space_calls = 0;
  uint64_t address_space_calls_without_stack = 0;
  // Stacks the unwinder could not finish because the copy ended (at its size) below the
  // end of the stack.
  uint64_t stacks_cut_at_copy_end = 0;
  // Processes whose stacks needed a larger copy than the configured one, and its new size.
  std::unordered_map<Pid, uint32_t> raised_stack_copies;
  std::vector<uint32_t> unwind_ns{};  // time unwinds took (a uniform sample of at most 64k)
  uint64_t lost_bpf_events = 0;       // ring buffer full in the kernel
  std::vector<uint64_t> lost_bpf_events_per_cpu{};
  uint64_t lost_sideband_records = 0;   // perf MMAP/COMM records lost
  uint64_t memory_samples_dropped = 0;  // past kMaxMemorySamplesPerProcess
  // Children left unsampled: the table of tracked processes was full (--max-processes).
  uint64_t processes_not_followed = 0;
  uint32_t max_tracked_processes = 0;
  // Events and samples that reached the model after it had taken their time (they came
  // later than the reorder window): applied out of order, e.g. a mapping after samples in it.
  uint64_t late_events = 0;
  std::optional<KernelUnwindStats> kernel_unwind{};  // --call-graph dwarf only
  std::map<RuntimeKind, RuntimeStats> runtimes;      // those whose processes were recorded
  WakingStats wakings;
};

// Events of a process lost in the ring buffer (it was full), noticed at `time` (the
// recorder checks every poll, ~100 ms).
struct LossRecord {
  MonotonicNs time;
  Pid pid;
  uint64_t count = 0;
};

// How user stacks are taken (--call-graph).
enum class CallGraph : uint8_t {
  kFramePointers,  // fp: frame pointers walked in the kernel
  kDwarf,          // dwarf: CFI tables walked in the kernel, stack copies as the fallback
  kDwarfCopy,      // dwarf-copy: every stack copied and unwound in userspace
};

// "fp", "dwarf", "dwarf-copy": the option's words, also in saved event logs and meta.extra.
inline const char* call_graph_name(CallGraph mode) {
  switch (mode) {
    case CallGraph::kFramePointers:
      return "fp";
    case CallGraph::kDwarf:
      return "dwarf";
    case CallGraph::kDwarfCopy:
      return "dwarf-copy";
  }
  return "?";
}
inline std::optional<CallGraph> call_graph_named(std::string_view name) {
  for (CallGraph mode : {CallGraph::kFramePointers, CallGraph::kDwarf, CallGraph::kDwarfCopy})
    if (name == call_graph_name(mode)) return mode;
  return std::nullopt;
}
// Whether stacks come with CFI unwinding (tables in the kernel or copies in userspace).
inline bool uses_dwarf(CallGraph mode) { return mode != CallGraph::kFramePointers; }

// record --memory: a process's resident memory as the kernel counts it, each time it moved by
// a step (bpf/events.h: BPFPROF_MEMORY_STEP_BYTES) since the last one.
struct MemorySample {
  MonotonicNs time;
  uint64_t resident_bytes = 0;  // file, anonymous and shared-memory pages: what VmRSS counts
  uint64_t anon_bytes = 0;
  uint64_t swap_bytes = 0;
};
// A process's memory samples kept (a step each: 256 GB of churn); past it, they are counted.
inline constexpr size_t kMaxMemorySamplesPerProcess = size_t{1} << 20;

struct Recording {
  MonotonicNs start_time;  // time zero of the profile
  MonotonicNs end_time;
  double start_wall_clock_ms = 0;  // the wall clock at start_time, ms since the epoch
  uint32_t frequency_hz = 0;
  std::string sampling_event{};  // "cycles" or "cpu-clock"
  bool off_cpu = false;          // switch-out stacks and switch-in events were recorded
  bool record_wakers = false;    // who woke each thread (with off_cpu)
  bool record_memory = false;    // each process's resident memory over time (--memory)
  // record --allocations: the C allocator's calls, one sampled per this many bytes on average
  // (0: not recorded).
  uint64_t allocation_period = 0;
  uint64_t wake_threshold_ns = 0;  // waits this long get a marker; 0: one interval
  CallGraph call_graph = CallGraph::kFramePointers;
  bool fixed_stack_copy_size = false;  // dwarf,SIZE given: no process got a larger copy
  // Where bpfprof itself runs: a process in the same container or pod is not labelled with it
  // (tests run inside a container would have every track say so).
  ProcessContext recorder_context;
  std::vector<LifecycleEvent> events{};
  // A deque: a live recording takes samples from the front as they go into the model.
  std::deque<SampleRecord> samples;
  RawStackTree raw_stacks;
  RuntimeFrameTable runtime_frames;
  WakerTable wakers;
  RecordingStats stats;
  std::vector<LossRecord> losses{};
  // Thread names a runtime read from its own objects (a Java thread's name beyond the
  // kernel's 15 characters), by process and thread id: the profile names those threads so.
  std::map<std::pair<int32_t, int32_t>, std::string> runtime_thread_names{};
  // record --memory: each process's resident memory over time, in time order.
  std::unordered_map<Pid, std::vector<MemorySample>> memory{};
};

// A copy without the pending events, samples and raw stacks, which the model has not taken
// yet: what a profile of the model needs (its metadata, statistics, Python frames, wakers),
// for a period written on another thread while the recording goes on.
Recording copy_without_pending(Recording& recording);

}  // namespace bpfprof
