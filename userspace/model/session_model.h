// The session model: processes and threads over time, their address spaces, and each
// thread's samples with stacks resolved to (library, offset) frames. Built by replaying a
// Recording's events and samples in timestamp order.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "bpf/events.h"
#include "userspace/model/address_spaces.h"
#include "userspace/model/frame_key.h"
#include "userspace/model/ids.h"
#include "userspace/model/recording.h"
#include "userspace/model/stack_resolver.h"
#include "userspace/model/thread_accounting.h"
#include "userspace/model/thread_waits.h"
#include "userspace/model/waker_shares.h"

namespace bpfprof {

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

// The memory a page-fault sample stands for: BPFPROF_PAGE_FAULT_PERIOD faults of 4 KiB pages
// (x86-64's; the transparent huge pages of a VMA advised so are under-counted).
inline constexpr uint64_t kPageFaultSampleBytes = uint64_t{BPFPROF_PAGE_FAULT_PERIOD} * 4096;

// The bytes a sampled block of `bytes` stands for when one call is sampled per `period` bytes
// on average (exponential countdowns): it was sampled with chance 1 - e^(-bytes/period).
int64_t sampled_block_weight(uint64_t bytes, uint64_t period);

// Memory a thread brought in (record --memory: a page-fault sample) or allocated and freed
// (record --allocations: a sampled allocator call), and where.
struct ThreadAllocation {
  MonotonicNs time;
  StackId stack;
  // Bytes brought in or allocated; a block freed (record --allocations) is negative, with the
  // address it had.
  int64_t bytes = 0;
  uint64_t address = 0;  // record --allocations' blocks only
  // A block freed by another thread than the one that allocated it is in the allocating
  // thread's table (the front end matches a free with its block within one table): who freed.
  std::optional<Tid> by_thread{};
};

// A sampled system call of a thread that grew or shrank its address space (record --memory).
struct ThreadAddressSpaceCall {
  MonotonicNs time;
  StackId stack;
  AddressSpaceCall what;
  int64_t sampled_bytes = 0;  // what the change stands for in the sampling (< 0: shrank)
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
  std::vector<ThreadAllocation> allocations;                // in time order
  std::vector<ThreadAddressSpaceCall> address_space_calls;  // in time order
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
  ProcessContext context;        // its container, pod or service, where known
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
  const std::vector<Library>& libraries() const { return spaces_.libraries(); }
  const ResolvedStackTree& stacks() const { return stacks_; }
  const Library& library(LibId id) const { return spaces_.library(id); }

  // Threads ordered for display: by process start time, each process's main thread first.
  std::vector<ThreadIndex> display_order() const;

  // Individual steps, public so that tests can drive the model without a recording.
  void apply(MonotonicNs time, const LifecyclePayload& event);
  void add_sample(const SampleRecord& sample, const RawStackTree& raw_stacks);

 private:
  // Processes and threads starting, exec'ing, exiting and renamed
  // (session_model_lifecycle.cpp).
  void on(MonotonicNs t, const ForkEvent& e);
  void on(MonotonicNs t, const ExecEvent& e);
  void on(MonotonicNs t, const ExitEvent& e);
  void on(MonotonicNs t, const CommEvent& e);
  void on(MonotonicNs t, const MmapEvent& e);
  void on(MonotonicNs t, const AddressSpaceResetEvent& e);
  void on(MonotonicNs t, const ProcessStartEvent& e);
  void on(MonotonicNs t, const ExistingProcessEvent& e);
  void on(MonotonicNs t, const ProcessContextEvent& e);

  ProcessIndex start_process(MonotonicNs t, Pid pid, std::string name, std::string executable);
  // `runtime`: the thread's runtime now, if known (see ThreadAccounting).
  ThreadIndex start_thread(MonotonicNs t, ProcessIndex process, Tid tid, std::string name,
                           std::optional<CpuTimeNs> runtime);
  void end_process(MonotonicNs t, ProcessIndex process);
  ProcessIndex live_process(MonotonicNs t, Pid pid);
  void adopt_snapshot(MonotonicNs t, ProcessIndex index,
                      const ExistingProcessEvent& e);  // creates an entry if none is live
  ThreadIndex live_thread(MonotonicNs t, Pid pid, Tid tid);

  StackId resolve(Pid pid, RawStackId raw, const RawStackTree& raw_stacks) {
    return resolver_.resolve(pid, spaces_.find(pid), raw, raw_stacks, stacks_);
  }
  // Waits, the wakings that end them and the wakers' shares (session_model_waits.cpp).
  StackId off_cpu_stack(Thread& th, const SampleRecord& switch_out, const RawStackTree& raw_stacks);
  void note_waking(Thread& th, const SampleRecord& waking, const RawStackTree& raw_stacks);
  void add_allocator_call(ThreadIndex ti, const SampleRecord& sample,
                          const RawStackTree& raw_stacks);
  // The thread's wait (if one is open) ends at t: matched with the waking that ended it.
  std::optional<ThreadWaits::EndedWait> end_wait(Thread& th, MonotonicNs t);
  std::optional<ThreadAccounting::Runnable> runnable_after(
      const Thread& th, const std::optional<ThreadWaits::EndedWait>& ended, MonotonicNs t);
  void take_wakers(const WakerTable& table);

  Process& process(ProcessIndex i) { return processes_[i.value]; }
  Thread& thread(ThreadIndex i) { return threads_[i.value]; }

  std::vector<Process> processes_;
  std::vector<Thread> threads_;
  std::unordered_map<Pid, ProcessIndex> live_processes_;
  std::unordered_map<Tid, ThreadIndex> live_threads_;
  // Threads whose exit was seen: a task still samples on its way out after the exit
  // tracepoint, and those samples are its own.
  std::unordered_map<Tid, ThreadIndex> exited_threads_;
  AddressSpaces spaces_;
  ResolvedStackTree stacks_;
  StackResolver resolver_;
  AccountingRules rules_;
  uint64_t wake_threshold_ns_ = 0;
  uint64_t allocation_period_ = 0;  // record --allocations
  // record --allocations: the thread that allocated each sampled block not yet freed.
  struct SampledBlock {
    Pid pid;
    uint64_t address;
    bool operator==(const SampledBlock&) const = default;
  };
  struct SampledBlockHash {
    size_t operator()(const SampledBlock& b) const {
      return std::hash<uint64_t>()(b.address ^ (static_cast<uint64_t>(b.pid.value) << 47));
    }
  };
  std::unordered_map<SampledBlock, ThreadIndex, SampledBlockHash> block_owners_;
  bool wakers_by_second_ = false;
  WakerTable wakers_;
  // consume(): how much of the recording's pending events and samples is already in order.
  size_t sorted_pending_events_ = 0;
  size_t sorted_pending_samples_ = 0;
  std::optional<MonotonicNs> taken_until_;  // the last `until` of consume()
};

}  // namespace bpfprof
