#include "userspace/capture/event_decoder.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "bpf/events.h"
#include "runtimes/registry.h"
#include "symbols/dwarf/unwinder.h"
#include "symbols/elf/elf_file.h"
#include "symbols/util/text.h"
#include "symbols/util/unique_handle.h"
#include "symbols/util/untrusted_file.h"

namespace bpfprof {

namespace {

std::string bounded_string(const char* s, size_t max) { return std::string(s, strnlen(s, max)); }

// The program behind a path, whatever the path: git runs as /usr/bin/git and, for its
// subcommands, as /usr/lib/git-core/git, two copies of one build. With the file's key as the
// kernel names it (nullopt if it could not be opened).
std::pair<std::string, std::optional<bpfprof_file_key>> program_identity(const std::string& path) {
  const UniqueFd fd =
      open_untrusted(path, UntrustedKind::kBinary, std::nullopt, Copying::kNever).fd;
  struct stat status;
  if (!fd.valid() || fstat(fd.get(), &status) != 0) return {path, std::nullopt};
  const std::vector<uint8_t> build_id = read_elf_build_id(fd.get());
  return {build_id.empty() ? path : "build-id " + hex_string(build_id), file_key_of(status)};
}

// A uniform sample of the unwind times (reservoir sampling): the median stays meaningful and
// memory stays bounded however long the recording.
void record_unwind_time(RecordingStats& stats, uint32_t ns) {
  constexpr size_t kKept = 65536;
  if (stats.unwind_ns.size() < kKept) {
    stats.unwind_ns.push_back(ns);
    return;
  }
  // copied_stacks counts the unwinds before this one.
  uint64_t mixed =
      stats.copied_stacks + 0x9E3779B97F4A7C15ull;  // splitmix64: a fixed pseudo-random slot
  mixed = (mixed ^ (mixed >> 30)) * 0xBF58476D1CE4E5B9ull;
  mixed = (mixed ^ (mixed >> 27)) * 0x94D049BB133111EBull;
  const uint64_t slot = (mixed ^ (mixed >> 31)) % (stats.copied_stacks + 1);
  if (slot < kKept) stats.unwind_ns[slot] = ns;
}

UserRegisters user_registers(const bpfprof_copy_event& e) {
  static_assert(BPFPROF_USER_REGS == UserRegisters::kCount &&
                BPFPROF_REG_IP == UserRegisters::kIp && BPFPROF_REG_SP == UserRegisters::kSp &&
                BPFPROF_REG_BP == UserRegisters::kBp);
  UserRegisters registers;
  memcpy(registers.dwarf.data(), e.user_regs, sizeof e.user_regs);
  return registers;
}

void count_stack_copy(RecordingStats& stats, size_t event_bytes, size_t stack_bytes,
                      bool cut_at_copy_end) {
  ++stats.copied_stacks;
  stats.copy_event_bytes += event_bytes;
  stats.stack_copy_bytes += stack_bytes;
  if (cut_at_copy_end) ++stats.stacks_cut_at_copy_end;
}

}  // namespace

// Stacks unwound from copies are not bound by the kernel's frame-pointer walk limit; they
// stop where the in-kernel walk does, so that both modes give the same frames.
constexpr size_t kMaxUnwoundFrames = BPFPROF_MAX_UNWOUND_FRAMES;

static_assert(kExecRawFrame == BPFPROF_RAW_EXEC_FRAME);

// Interns `ips` (user frames, then kernel frames, each innermost first) as a root-first path.
// The runtimes' frames sent for the sample replace its interpreter-loop frames
// (runtimes/runtime.h). A sample inside execve after the old image is gone has the exec frame
// as its only user one.
RawStackId EventDecoder::intern_stack(const Header& h, Recording& rec, const uint64_t* ips,
                                      size_t available, uint32_t user_depth,
                                      uint32_t kernel_depth) {
  size_t user = std::min<size_t>(user_depth, available);
  size_t kernel = std::min<size_t>(kernel_depth, available - user);
  std::vector<uint64_t>& path = scratch_path_;  // root first
  path.clear();
  if (user == 1 && ips[0] == kExecRawFrame) {
    path.push_back(kExecRawFrame);
  } else {
    // A frame-pointer walk that wanders into data yields non-canonical addresses; nothing
    // beyond such a frame is a real caller.
    size_t user_kept = 0;
    while (user_kept < user && is_user_address(ips[user_kept])) ++user_kept;
    const uint64_t* user_frames = ips;  // innermost first
    if (runtimes_) {
      scratch_user_.assign(ips, ips + user_kept);
      runtimes_->merge_into(h.pid, h.tid, h.time, scratch_user_, rec);
      user_frames = scratch_user_.data();
      user_kept = scratch_user_.size();
    }
    for (size_t i = user_kept; i-- > 0;)
      if (user_frames[i]) path.push_back(user_frames[i]);
  }
  for (size_t i = user + kernel; i-- > user;)
    if (ips[i]) path.push_back(ips[i]);
  // Threads that come and go without an exit event seen (lost, or before the recording) would
  // keep theirs: a bound.
  constexpr size_t kMostRecentPaths = 16384;
  if (recent_paths_.size() >= kMostRecentPaths && !recent_paths_.contains(h.tid.value))
    recent_paths_.clear();
  return rec.raw_stacks.intern_path(path, recent_paths_[h.tid.value]);
}

namespace {

OffCpuState off_cpu_state(uint32_t state) {
  return state >= 1 && state <= 3 ? static_cast<OffCpuState>(state) : OffCpuState::kSleeping;
}

}  // namespace

void EventDecoder::decode(const void* data, size_t size, Recording& rec) {
  if (size < sizeof(bpfprof_event_header)) return;
  // The ring buffer gives 8-byte aligned events; a saved stream's records lie at any offset,
  // and the event structs are read in place: copy those first (found by fuzz_event_log).
  if (reinterpret_cast<uintptr_t>(data) % alignof(uint64_t) != 0) {
    aligned_copy_.resize((size + sizeof(uint64_t) - 1) / sizeof(uint64_t));
    memcpy(aligned_copy_.data(), data, size);
    data = aligned_copy_.data();
  }
  bpfprof_event_header raw;
  memcpy(&raw, data, sizeof(raw));
  const Header h{MonotonicNs{raw.timestamp_ns}, Pid{static_cast<int32_t>(raw.pid)},
                 Tid{static_cast<int32_t>(raw.tid)}, Cpu{raw.cpu}};
  switch (raw.kind) {
    case BPFPROF_EVENT_STACK:
      return decode_stack(h, data, size, rec);
    case BPFPROF_EVENT_SWITCH_IN:
      rec.samples.push_back(SampleRecord{h.time, h.pid, h.tid, h.cpu, CpuTimeNs{0},
                                         RawStackTree::kRoot, SampleKind::kSwitchIn});
      return;
    case BPFPROF_EVENT_WAKING:
      return decode_waking(h, data, size, rec);
    case BPFPROF_EVENT_ALLOCATION:
      return decode_allocation(h, data, size, rec);
    case BPFPROF_EVENT_ADDRESS_SPACE:
      return decode_address_space_call(h, data, size, rec);
    case BPFPROF_EVENT_MEMORY:
      return decode_memory(h, data, size, rec);
    case BPFPROF_EVENT_FORK:
    case BPFPROF_EVENT_EXEC:
    case BPFPROF_EVENT_EXIT:
    case BPFPROF_EVENT_COMM:
      return decode_lifecycle(h, raw.kind, data, size, rec);
    default:
      if (runtimes_) runtimes_->take_event(raw.kind, data, size, rec);
      return;
  }
}

void EventDecoder::add_timer_sample(const Header& h, CpuTimeNs cpu_time, RawStackId stack,
                                    Recording& rec) {
  rec.samples.push_back(SampleRecord{h.time, h.pid, h.tid, h.cpu, cpu_time, stack});
  ++rec.stats.samples;
  if (!rec.stats.first_sample_time.value) rec.stats.first_sample_time = h.time;
}

void EventDecoder::add_switch_out(const Header& h, CpuTimeNs cpu_time, RawStackId stack,
                                  uint32_t state, uint32_t flags, Recording& rec) {
  rec.samples.push_back(SampleRecord{h.time, h.pid, h.tid, h.cpu, cpu_time, stack,
                                     SampleKind::kSwitchOut, off_cpu_state(state),
                                     (flags & BPFPROF_SWITCH_STACK_REUSED) != 0});
  ++rec.stats.switch_outs;
}

bool EventDecoder::unwinds_in_userspace(const void* data, size_t size) {
  bpfprof_stack_event_head head;
  if (size < sizeof(head)) return false;
  memcpy(&head, data, sizeof(head));  // a saved stream's records lie at any offset
  return head.header.kind == BPFPROF_EVENT_STACK && head.payload == BPFPROF_PAYLOAD_COPY;
}

void EventDecoder::count_user_stack(StackSources& sources, UserStackSource source, bool settled) {
  if (source == UserStackSource::kKernelWalk) {
    ++sources.kernel;
    if (settled) ++sources.kernel_settled;
  }
  if (source == UserStackSource::kCopy) {
    ++sources.copied;
    if (settled) ++sources.copied_settled;
  }
}

void EventDecoder::decode_stack(const Header& h, const void* data, size_t size, Recording& rec) {
  if (size < sizeof(bpfprof_stack_event_head)) return;
  const auto& head = *static_cast<const bpfprof_stack_event_head*>(data);
  if (head.context < BPFPROF_CONTEXT_SAMPLE || head.context > BPFPROF_CONTEXT_ADDRESS_SPACE) return;
  UserStackSource source = UserStackSource::kNone;
  const std::optional<RawStackId> stack = payload_stack(h, head, data, size, source, rec);
  if (!stack) return;
  if (source != UserStackSource::kNone) ++rec.stats.user_stacks_taken;
  const CpuTimeNs cpu_time{head.cpu_time_ns};
  constexpr uint64_t kSettledNs = 1'000'000'000;
  const uint64_t first = rec.stats.first_sample_time.value;
  const bool settled = first && h.time.value >= first + kSettledNs;
  if (source == UserStackSource::kCopy) ++rec.stats.stack_copies_by_process[h.pid];
  switch (head.context) {
    case BPFPROF_CONTEXT_SAMPLE:
      count_user_stack(rec.stats.on_cpu_stacks, source, settled);
      rec.stats.sample_event_bytes += size;
      return add_timer_sample(h, cpu_time, *stack, rec);
    case BPFPROF_CONTEXT_SWITCH_OUT:
      count_user_stack(rec.stats.off_cpu_stacks, source, settled);
      return add_switch_out(h, cpu_time, *stack, head.state, head.flags, rec);
    case BPFPROF_CONTEXT_PAGE_FAULT:
      rec.samples.push_back(
          SampleRecord{h.time, h.pid, h.tid, h.cpu, cpu_time, *stack, SampleKind::kPageFault});
      return;
    case BPFPROF_CONTEXT_ALLOCATION:
    case BPFPROF_CONTEXT_ADDRESS_SPACE:
      paired_stacks_[h.cpu.value] = {h.time, h.tid, *stack};
      return;
    default:
      return decode_waker_stack(h, *stack, rec);
  }
}

// Frames (walked in the kernel, or by frame pointers) are interned as they are; a copy is
// unwound first.
std::optional<RawStackId> EventDecoder::payload_stack(const Header& h,
                                                      const bpfprof_stack_event_head& head,
                                                      const void* data, size_t size,
                                                      UserStackSource& source, Recording& rec) {
  switch (head.payload) {
    case BPFPROF_PAYLOAD_FP_FRAMES:
    case BPFPROF_PAYLOAD_UNWOUND_FRAMES: {
      constexpr size_t kFixed = offsetof(bpfprof_frames_event, ips);
      const auto* e = static_cast<const bpfprof_frames_event*>(data);
      if (head.payload == BPFPROF_PAYLOAD_UNWOUND_FRAMES && head.user_depth)
        source = UserStackSource::kKernelWalk;
      return intern_stack(h, rec, reinterpret_cast<const uint64_t*>(e->ips),
                          (size - kFixed) / sizeof(uint64_t), head.user_depth, head.kernel_depth);
    }
    case BPFPROF_PAYLOAD_COPY: {
      if (size < offsetof(bpfprof_copy_event, stack) || !unwinder_) return std::nullopt;
      bool has_user_stack = false;
      const RawStackId stack =
          copy_stack(h, *static_cast<const bpfprof_copy_event*>(data), size, has_user_stack, rec);
      if (has_user_stack) source = UserStackSource::kCopy;
      return stack;
    }
    default:
      return std::nullopt;
  }
}

RawStackId EventDecoder::copy_stack(const Header& h, const bpfprof_copy_event& e, size_t size,
                                    bool& has_user_stack, Recording& rec) {
  const std::vector<uint64_t> user = unwind_user_stack(h, e, size, rec.stats);
  // Laid out as frames are: user frames, then kernel frames.
  std::vector<uint64_t>& ips = scratch_ips_;
  ips.assign(user.begin(), user.end());
  const uint32_t kernel = std::min<uint32_t>(e.head.kernel_depth, BPFPROF_MAX_STACK_DEPTH);
  ips.insert(ips.end(), e.kernel_ips, e.kernel_ips + kernel);
  has_user_stack = !user.empty();
  return intern_stack(h, rec, ips.data(), ips.size(), static_cast<uint32_t>(user.size()), kernel);
}

// Who woke a thread. Its waker's stack comes in the next event from that CPU, or was taken
// for the same pair less than an interval ago (the last one stands for it), or not at all.
static_assert(static_cast<uint32_t>(WakerContext::kThread) == BPFPROF_WAKER_TASK &&
              static_cast<uint32_t>(WakerContext::kInterrupt) == BPFPROF_WAKER_INTERRUPT);

void EventDecoder::decode_waking(const Header& h, const void* data, size_t size, Recording& rec) {
  if (size < sizeof(bpfprof_waking_event)) return;
  const auto* e = static_cast<const bpfprof_waking_event*>(data);
  const WakerContext context =
      e->context == BPFPROF_WAKER_INTERRUPT ? WakerContext::kInterrupt : WakerContext::kThread;
  Waker waker{context, Pid{static_cast<int32_t>(e->waker_pid)},
              Tid{static_cast<int32_t>(e->waker_tid)},
              bounded_string(e->waker_comm, sizeof(e->waker_comm))};
  SampleRecord record{
      h.time, h.pid, h.tid, h.cpu, CpuTimeNs{0}, RawStackTree::kRoot, SampleKind::kWaking};
  record.waker = rec.wakers.intern(waker);
  WakingStats& stats = rec.stats.wakings;
  ++stats.wakings;
  if (e->flags & BPFPROF_WAKER_USER_STACK_SKIPPED) ++stats.user_stacks_skipped;
  if (e->flags & BPFPROF_WAKER_STACK_FOLLOWS) {
    auto [pending, added] = wakings_awaiting_stack_.try_emplace(h.cpu.value, record);
    if (added) return;
    ++stats.stacks_missing;  // the earlier one's stack was lost
    rec.samples.push_back(std::exchange(pending->second, record));
    return;
  }
  if (e->flags & BPFPROF_WAKER_STACK_REUSED) {
    ++stats.stacks_reused;
    auto last = last_waker_stack_.find(
        WakerPair{waker.tid.value, static_cast<uint8_t>(context), h.tid.value});
    if (last != last_waker_stack_.end()) record.stack = last->second;
  }
  rec.samples.push_back(record);
}

void EventDecoder::move_raw_stacks(const std::function<RawStackId(RawStackId)>& move) {
  for (auto& [pair, stack] : last_waker_stack_) stack = move(stack);
}

void EventDecoder::decode_waker_stack(const Header& h, RawStackId stack, Recording& rec) {
  auto pending = wakings_awaiting_stack_.find(h.cpu.value);
  if (pending == wakings_awaiting_stack_.end() || pending->second.time != h.time) return;
  SampleRecord record = pending->second;
  wakings_awaiting_stack_.erase(pending);
  record.stack = stack;
  const Waker& waker = rec.wakers[record.waker];
  last_waker_stack_[WakerPair{waker.tid.value, static_cast<uint8_t>(waker.context),
                              record.tid.value}] = stack;
  ++rec.stats.wakings.stacks_taken;
  rec.samples.push_back(record);
}

// The runtimes' event kinds (bpf/runtime_list.h: 8 to 31) are none of the fixed ones.
#define BPFPROF_KIND_APART(ID, id, Kind, language, colour, event)               \
  static_assert(event > BPFPROF_EVENT_WAKING && event < BPFPROF_EVENT_MEMORY && \
                event != BPFPROF_EVENT_ALLOCATION && event != BPFPROF_EVENT_ADDRESS_SPACE);
BPFPROF_RUNTIME_LIST(BPFPROF_KIND_APART)
#undef BPFPROF_KIND_APART

static_assert(static_cast<uint32_t>(AddressSpaceCallKind::kMmap) == BPFPROF_ADDRESS_SPACE_MMAP &&
              static_cast<uint32_t>(AddressSpaceCallKind::kMremap) == BPFPROF_ADDRESS_SPACE_MREMAP);

void EventDecoder::add_paired_call(const Header& h, SampleRecord record, uint64_t& calls,
                                   uint64_t& without_stack, Recording& rec) {
  auto stack = paired_stacks_.find(h.cpu.value);
  if (stack != paired_stacks_.end() && stack->second.time == h.time && stack->second.tid == h.tid)
    record.stack = stack->second.stack;
  else
    ++without_stack;
  if (stack != paired_stacks_.end()) paired_stacks_.erase(stack);
  ++calls;
  rec.samples.push_back(record);
}

// A sampled allocator call: its stack came just before from the same CPU, unless a sample
// interrupted the walk (the block is kept, without a stack).
void EventDecoder::decode_allocation(const Header& h, const void* data, size_t size,
                                     Recording& rec) {
  if (size < sizeof(bpfprof_allocation_event)) return;
  const auto* e = static_cast<const bpfprof_allocation_event*>(data);
  SampleRecord record{
      h.time, h.pid, h.tid, h.cpu, CpuTimeNs{0}, RawStackTree::kRoot, SampleKind::kAllocatorCall};
  record.allocator_call = {e->address, e->bytes, e->freed_address, e->freed_bytes};
  add_paired_call(h, record, rec.stats.allocator_calls, rec.stats.allocator_calls_without_stack,
                  rec);
}

void EventDecoder::decode_address_space_call(const Header& h, const void* data, size_t size,
                                             Recording& rec) {
  if (size < sizeof(bpfprof_address_space_event)) return;
  const auto* e = static_cast<const bpfprof_address_space_event*>(data);
  if (e->call < BPFPROF_ADDRESS_SPACE_MMAP || e->call > BPFPROF_ADDRESS_SPACE_MREMAP) return;
  SampleRecord record{h.time,
                      h.pid,
                      h.tid,
                      h.cpu,
                      CpuTimeNs{0},
                      RawStackTree::kRoot,
                      SampleKind::kAddressSpaceCall};
  record.address_space_call = {static_cast<AddressSpaceCallKind>(e->call), e->address, e->change};
  add_paired_call(h, record, rec.stats.address_space_calls,
                  rec.stats.address_space_calls_without_stack, rec);
}

// The user stack's pcs, innermost first (none without a user context); the copy's cost
// and whether it was cut at its end are counted, and the process's copy size adapted.
std::vector<uint64_t> EventDecoder::unwind_user_stack(const Header& h, const bpfprof_copy_event& e,
                                                      size_t event_size, RecordingStats& stats) {
  const UserRegisters registers = user_registers(e);
  if (!registers.ip()) return {};
  const size_t copied =
      std::min<size_t>(e.stack_size, event_size - offsetof(bpfprof_copy_event, stack));
  apply_address_space_changes_until(h.time);
  const auto start = std::chrono::steady_clock::now();
  UnwoundStack user =
      unwinder_->unwind(h.pid.value, h.tid.value, registers, e.stack, copied, kMaxUnwoundFrames);
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
      std::chrono::steady_clock::now() - start);
  record_unwind_time(stats, static_cast<uint32_t>(std::min<int64_t>(ns.count(), UINT32_MAX)));
  const uint64_t more_needed =
      (e.head.flags & BPFPROF_STACK_COPY_AT_LIMIT) ? user.stack_bytes_needed : 0;
  count_stack_copy(stats, event_size, copied, more_needed != 0);
  if (sizer_) sizer_->observe(h.pid, more_needed, e.stack_copy_limit);
  if (copied_stack_observer_) {
    // The table the walk in the kernel stopped for first, then those of the frames unwound
    // here (which may not reach it: JIT code without frame information).
    std::vector<uint64_t> pcs;
    pcs.reserve(user.pcs.size() + 1);
    if (e.unloaded_table_pc) pcs.push_back(e.unloaded_table_pc);
    pcs.insert(pcs.end(), user.pcs.begin(), user.pcs.end());
    copied_stack_observer_(h.pid, pcs);
  }
  return std::move(user.pcs);
}

void EventDecoder::decode_lifecycle(const Header& h, uint32_t kind, const void* data, size_t size,
                                    Recording& rec) {
  auto event = [&](auto payload) {
    rec.events.push_back(LifecycleEvent{h.time, std::move(payload)});
  };
  if (kind == BPFPROF_EVENT_FORK && size >= sizeof(bpfprof_fork_event)) {
    const auto* e = static_cast<const bpfprof_fork_event*>(data);
    const Pid child{static_cast<int32_t>(e->child_pid)};
    if (sizer_ && child != h.pid) sizer_->on_fork(h.pid, child);
    event(ForkEvent{h.pid, h.tid, child, Tid{static_cast<int32_t>(e->child_tid)},
                    bounded_string(e->child_comm, sizeof(e->child_comm))});
  } else if (kind == BPFPROF_EVENT_EXEC && size >= sizeof(bpfprof_exec_event)) {
    const auto* e = static_cast<const bpfprof_exec_event*>(data);
    std::string filename = bounded_string(e->filename, sizeof(e->filename));
    if (sizer_) {
      auto [program, file] = program_identity(filename);
      sizer_->on_exec(h.pid, program, file);
    }
    event(ExecEvent{h.pid, h.tid, Tid{static_cast<int32_t>(e->old_tid)},
                    bounded_string(e->comm, sizeof(e->comm)), std::move(filename), e->euid});
  } else if (kind == BPFPROF_EVENT_EXIT && size >= sizeof(bpfprof_exit_event)) {
    const auto* e = static_cast<const bpfprof_exit_event*>(data);
    event(ExitEvent{h.pid, h.tid, CpuTimeNs{e->cpu_time_ns}, e->exit_code, e->group_dead != 0,
                    bounded_string(e->comm, sizeof(e->comm))});
    recent_paths_.erase(h.tid.value);
    if (unwinder_ && e->group_dead) exited_processes_.push_back({h.pid.value, h.time});
    if (sizer_ && e->group_dead) sizer_->on_exit(h.pid);
  } else if (kind == BPFPROF_EVENT_COMM && size >= sizeof(bpfprof_comm_event)) {
    const auto* e = static_cast<const bpfprof_comm_event*>(data);
    event(CommEvent{h.pid, h.tid, bounded_string(e->comm, sizeof(e->comm))});
  }
}

void EventDecoder::decode_memory(const Header& h, const void* data, size_t size, Recording& rec) {
  if (size < sizeof(bpfprof_memory_event)) return;
  const auto* e = static_cast<const bpfprof_memory_event*>(data);
  std::vector<MemorySample>& series = rec.memory[h.pid];
  if (series.size() >= kMaxMemorySamplesPerProcess) {
    ++rec.stats.memory_samples_dropped;
    return;
  }
  series.push_back(MemorySample{h.time, e->file_bytes + e->anon_bytes + e->shmem_bytes,
                                e->anon_bytes, e->swap_bytes});
}

void EventDecoder::forget_exited_processes(MonotonicNs decoded_until) {
  if (!unwinder_) return;
  apply_address_space_changes_until(decoded_until);
  std::erase_if(exited_processes_, [&](const ExitedProcess& exited) {
    if (exited.time.value + kExitedProcessGraceNs >= decoded_until.value) return false;
    unwinder_->remove(exited.pid);
    return true;
  });
}

// A pid that exited and is not forgotten yet, used again: its old mappings go first.
void EventDecoder::forget_reused_pid(int pid, MonotonicNs time) {
  std::erase_if(exited_processes_, [&](const ExitedProcess& exited) {
    if (exited.pid != pid || exited.time.value > time.value) return false;
    unwinder_->remove(pid);
    return true;
  });
}

void EventDecoder::queue_address_space_changes(const std::vector<LifecycleEvent>& events,
                                               size_t from) {
  if (!unwinder_) return;
  for (size_t i = from; i < events.size(); ++i) {
    const LifecyclePayload& payload = events[i].payload;
    const auto* fork = std::get_if<ForkEvent>(&payload);
    if (std::holds_alternative<AddressSpaceResetEvent>(payload) ||
        std::holds_alternative<MmapEvent>(payload) || (fork && fork->child_pid != fork->parent_pid))
      address_space_changes_.emplace(events[i].time.value, payload);
  }
}

void EventDecoder::apply_address_space_changes_until(MonotonicNs time) {
  auto end = address_space_changes_.upper_bound(time.value);
  for (auto it = address_space_changes_.begin(); it != end; ++it) {
    if (const auto* reset = std::get_if<AddressSpaceResetEvent>(&it->second)) {
      unwinder_->reset(reset->pid.value);
    } else if (const auto* mmap = std::get_if<MmapEvent>(&it->second)) {
      const MappingInfo& m = mmap->mapping;
      unwinder_->add_mapping(mmap->pid.value, m.start, m.start + m.length, m.file_offset, m.file());
    } else if (const auto* fork = std::get_if<ForkEvent>(&it->second)) {
      forget_reused_pid(fork->child_pid.value, MonotonicNs{it->first});
      unwinder_->copy(fork->parent_pid.value, fork->child_pid.value);
    }
  }
  address_space_changes_.erase(address_space_changes_.begin(), end);
}

}  // namespace bpfprof
