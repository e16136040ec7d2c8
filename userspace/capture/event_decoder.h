// Turns the BPF programs' ring-buffer events (bpf/events.h) into the Recording: lifecycle
// events, and stacks interned (stack copies unwound first) as samples, switch-outs or wakers'
// stacks, as their context says. The same path serves a live recording and the replay of a
// saved event log.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "userspace/capture/stack_copy_sizer.h"
#include "userspace/model/recording.h"

struct bpfprof_copy_event;
struct bpfprof_stack_event_head;

namespace bpfprof {

class DwarfUnwinder;
class Runtimes;

class EventDecoder {
 public:
  // `unwinder`: for stack copies (their user stacks are unwound as they arrive); without one,
  // stack events with a copy are dropped.
  explicit EventDecoder(DwarfUnwinder* unwinder = nullptr) : unwinder_(unwinder) {}

  // Runtimes' frames (runtimes/runtime.h) are merged into the user stacks of the samples
  // they came with; without (null), they are ignored and stacks stay native.
  void set_runtimes(Runtimes* runtimes) { runtimes_ = runtimes; }

  // Decodes one event into `recording`. Malformed or truncated events are ignored.
  void decode(const void* data, size_t size, Recording& recording);
  // Whether decoding the event unwinds a stack (a stack copy): the address-space changes up
  // to its time must be known by then.
  static bool unwinds_in_userspace(const void* data, size_t size);

  // Drops the unwinder's state of the processes that exited a while before `decoded_until`,
  // the time before which every event has been decoded. An exit travels in a ring of its own,
  // read before the samples; when a read leaves samples in their ring (its budget ran out:
  // stack copies at 20 kHz), a process's last samples come in the next batch, after its exit
  // was read. Forgotten at once, those would be unwound without mappings: whole short
  // processes would come out [truncated].
  void forget_exited_processes(MonotonicNs decoded_until);
  // Samples after the exit's tracepoint (inside do_exit) are the process's too.
  static constexpr uint64_t kExitedProcessGraceNs = 100'000'000;
  // Address-space changes for the unwinder (exec resets, mappings, forks) from the lifecycle
  // events from index `from` on. They are applied in time order with the stacks: a stack is
  // unwound with its process's mappings as they were when it was taken, also when one read
  // of the rings spans several images of a process (one that execs every 10 ms had 9 stacks
  // in 10 unwound with its last image's mappings).
  void queue_address_space_changes(const std::vector<LifecycleEvent>& events, size_t from);
  // The raw stack tree was compacted (a rotating output): the raw ids held here move.
  void move_raw_stacks(const std::function<RawStackId(RawStackId)>& move);

  // Called with the pcs of each user stack unwound from a copy (the kernel walk fell back),
  // innermost first: the recorder's in-kernel tables learn which files samples need first.
  using CopiedStackObserver = std::function<void(Pid, const std::vector<uint64_t>& pcs)>;
  void observe_copied_stacks(CopiedStackObserver observer) {
    copied_stack_observer_ = std::move(observer);
  }

  // From now on, processes whose stacks are cut at the copy's end get larger copies
  // (StackCopySizer); the changes are collected for the kernel side.
  void adapt_stack_copies(uint32_t initial_bytes, uint32_t max_bytes) {
    sizer_.emplace(initial_bytes, max_bytes);
  }
  // The processes whose copy size changed since the last call, with their new sizes.
  std::vector<std::pair<Pid, uint32_t>> take_stack_copy_changes() {
    return sizer_ ? sizer_->take_changes() : std::vector<std::pair<Pid, uint32_t>>{};
  }
  std::vector<std::pair<bpfprof_file_key, uint32_t>> take_stack_copy_file_changes() {
    return sizer_ ? sizer_->take_file_changes()
                  : std::vector<std::pair<bpfprof_file_key, uint32_t>>{};
  }

 private:
  std::vector<uint64_t> aligned_copy_;  // an event that came unaligned, copied
  struct Header {
    MonotonicNs time;
    Pid pid;
    Tid tid;
    Cpu cpu;
  };
  void apply_address_space_changes_until(MonotonicNs time);
  void forget_reused_pid(int pid, MonotonicNs time);
  // Where a user stack came from, for the kernel/copy split of the statistics.
  enum class UserStackSource { kNone, kKernelWalk, kCopy };
  static void count_user_stack(StackSources& sources, UserStackSource source, bool settled);
  // A stack event: its stack from its payload, then the record its context makes of it.
  void decode_stack(const Header& h, const void* data, size_t size, Recording& rec);
  // The raw stack of a stack event's payload, in whichever form it is; nullopt if malformed.
  std::optional<RawStackId> payload_stack(const Header& h, const bpfprof_stack_event_head& head,
                                          const void* data, size_t size, UserStackSource& source,
                                          Recording& rec);
  std::vector<uint64_t> unwind_user_stack(const Header& h, const bpfprof_copy_event& e,
                                          size_t event_size, RecordingStats& stats);
  // The raw stack of a stack copy: its user stack unwound here, then its kernel stack.
  RawStackId copy_stack(const Header& h, const bpfprof_copy_event& e, size_t size,
                        bool& has_user_stack, Recording& rec);
  void decode_waking(const Header& h, const void* data, size_t size, Recording& rec);
  void decode_memory(const Header& h, const void* data, size_t size, Recording& rec);
  // The stack of the waking decoded just before on that CPU (same time).
  void decode_waker_stack(const Header& h, RawStackId stack, Recording& rec);
  // record --allocations: a sampled allocator call, whose stack came just before it.
  void decode_allocation(const Header& h, const void* data, size_t size, Recording& rec);
  // record --memory: a sampled address-space call, whose stack came just before it.
  void decode_address_space_call(const Header& h, const void* data, size_t size, Recording& rec);
  // A sampled call's record, with the stack sent just before its event `h` on its CPU (same
  // time and thread) if it came: `calls` counts it, `without_stack` when the stack did not.
  void add_paired_call(const Header& h, SampleRecord record, uint64_t& calls,
                       uint64_t& without_stack, Recording& rec);
  void decode_lifecycle(const Header& h, uint32_t kind, const void* data, size_t size,
                        Recording& rec);
  void add_switch_out(const Header& h, CpuTimeNs cpu_time, RawStackId stack, uint32_t state,
                      uint32_t flags, Recording& rec);
  void add_timer_sample(const Header& h, CpuTimeNs cpu_time, RawStackId stack, Recording& rec);
  RawStackId intern_stack(const Header& h, Recording& rec, const uint64_t* ips, size_t available,
                          uint32_t user_depth, uint32_t kernel_depth);

  DwarfUnwinder* unwinder_;
  Runtimes* runtimes_ = nullptr;
  CopiedStackObserver copied_stack_observer_;
  std::vector<uint64_t> scratch_user_;
  std::vector<uint64_t> scratch_ips_;
  std::vector<uint64_t> scratch_path_;
  // Each thread's last raw stack, from which its next one is interned (PrefixTree::RecentPath).
  std::unordered_map<int32_t, RawStackTree::RecentPath> recent_paths_;
  struct ExitedProcess {
    int pid;
    MonotonicNs time;
  };
  std::vector<ExitedProcess> exited_processes_;  // not forgotten by the unwinder yet
  std::multimap<uint64_t, LifecyclePayload> address_space_changes_;  // by time
  std::optional<StackCopySizer> sizer_;
  // Wakings whose waker stack follows in an event of its own, by CPU.
  std::unordered_map<uint32_t, SampleRecord> wakings_awaiting_stack_;
  // The stacks of the allocator's and the address-space calls, whose event follows them.
  struct PairedStack {
    MonotonicNs time;
    Tid tid;
    RawStackId stack;
  };
  std::unordered_map<uint32_t, PairedStack> paired_stacks_;  // by CPU, the last one
  // The last waker stack taken for each (waker tid, context, wakee tid): it stands for the
  // pair's wakings until the next one is taken (BPFPROF_WAKER_STACK_REUSED).
  using WakerPair = std::tuple<int32_t, uint8_t, int32_t>;
  std::map<WakerPair, RawStackId> last_waker_stack_;
};

}  // namespace bpfprof
