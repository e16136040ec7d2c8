#include "userspace/capture/event_decoder.h"

#include <fcntl.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "bpf/events.h"
#include "symbols/dwarf/unwinder.h"
#include "symbols/elf/elf_file.h"
#include "symbols/util/text.h"
#include "symbols/util/unique_handle.h"

namespace bpfprof {

namespace {

std::string bounded_string(const char* s, size_t max) { return std::string(s, strnlen(s, max)); }

// The program behind a path, whatever the path: git runs as /usr/bin/git and, for its
// subcommands, as /usr/lib/git-core/git, two copies of one build.
std::string program_identity(const std::string& path) {
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  const std::vector<uint8_t> build_id = fd.valid() ? read_elf_build_id(fd.get()) : std::vector<uint8_t>{};
  return build_id.empty() ? path : "build-id " + hex_string(build_id);
}

// A uniform sample of the unwind times (reservoir sampling): the median stays meaningful and
// memory stays bounded however long the recording.
void record_unwind_time(RecordingStats& stats, uint32_t ns) {
  constexpr size_t kKept = 65536;
  if (stats.unwind_ns.size() < kKept) {
    stats.unwind_ns.push_back(ns);
    return;
  }
  // user_stacks counts the unwinds before this one.
  uint64_t mixed = stats.user_stacks + 0x9E3779B97F4A7C15ull;  // splitmix64: a fixed pseudo-random slot
  mixed = (mixed ^ (mixed >> 30)) * 0xBF58476D1CE4E5B9ull;
  mixed = (mixed ^ (mixed >> 27)) * 0x94D049BB133111EBull;
  const uint64_t slot = (mixed ^ (mixed >> 31)) % (stats.user_stacks + 1);
  if (slot < kKept) stats.unwind_ns[slot] = ns;
}

UserRegisters user_registers(const bpfprof_dwarf_sample_event& e) {
  static_assert(BPFPROF_USER_REGS == UserRegisters::kCount && BPFPROF_REG_IP == UserRegisters::kIp &&
                BPFPROF_REG_SP == UserRegisters::kSp && BPFPROF_REG_BP == UserRegisters::kBp);
  UserRegisters registers;
  memcpy(registers.dwarf.data(), e.user_regs, sizeof e.user_regs);
  return registers;
}

void count_stack_copy(RecordingStats& stats, size_t event_bytes, size_t stack_bytes, bool cut_at_copy_end) {
  ++stats.user_stacks;
  stats.dwarf_sample_bytes += event_bytes;
  stats.stack_copy_bytes += stack_bytes;
  if (cut_at_copy_end) ++stats.stacks_cut_at_copy_end;
}

}  // namespace

// Unwound stacks are not bound by the kernel's frame-pointer walk limit.
constexpr size_t kMaxUnwoundFrames = 1024;

// Interns `ips` (user frames, then kernel frames, each innermost first) as a root-first path.
RawStackId EventDecoder::intern_stack(RawStackTree& tree, const uint64_t* ips, size_t available, uint32_t user_depth,
                                      uint32_t kernel_depth) {
  size_t user = std::min<size_t>(user_depth, available);
  size_t kernel = std::min<size_t>(kernel_depth, available - user);
  // A frame-pointer walk that wanders into data yields non-canonical addresses; nothing
  // beyond such a frame is a real caller.
  size_t user_kept = 0;
  while (user_kept < user && is_user_address(ips[user_kept])) ++user_kept;
  std::vector<uint64_t>& path = scratch_path_;  // root first
  path.clear();
  for (size_t i = user_kept; i-- > 0;)
    if (ips[i]) path.push_back(ips[i]);
  for (size_t i = user + kernel; i-- > user;)
    if (ips[i]) path.push_back(ips[i]);
  return tree.intern_path(path);
}

void EventDecoder::decode(const void* data, size_t size, Recording& rec) {
  if (size < sizeof(bpfprof_event_header)) return;
  bpfprof_event_header header;
  memcpy(&header, data, sizeof(header));
  const MonotonicNs time{header.timestamp_ns};
  const Pid pid{static_cast<int32_t>(header.pid)};
  const Tid tid{static_cast<int32_t>(header.tid)};

  switch (header.kind) {
    case BPFPROF_EVENT_SAMPLE: {
      constexpr size_t kFixed = offsetof(bpfprof_sample_event, ips);
      if (size < kFixed) return;
      const auto* e = static_cast<const bpfprof_sample_event*>(data);
      RawStackId stack = intern_stack(rec.raw_stacks, reinterpret_cast<const uint64_t*>(e->ips), (size - kFixed) / sizeof(uint64_t), e->user_depth, e->kernel_depth);
      rec.samples.push_back(SampleRecord{time, pid, tid, Cpu{header.cpu}, CpuTimeNs{e->cpu_time_ns}, stack});
      ++rec.stats.samples;
      if (!rec.stats.first_sample_time.value) rec.stats.first_sample_time = time;
      break;
    }
    case BPFPROF_EVENT_DWARF_SWITCH_OUT:
    case BPFPROF_EVENT_DWARF_SAMPLE: {
      constexpr size_t kFixed = offsetof(bpfprof_dwarf_sample_event, stack);
      if (size < kFixed || !unwinder_) return;
      const auto* e = static_cast<const bpfprof_dwarf_sample_event*>(data);
      const bool switch_out = header.kind == BPFPROF_EVENT_DWARF_SWITCH_OUT;
      const size_t stack_size = std::min<size_t>(e->stack_size, size - kFixed);
      UnwoundStack user;
      const UserRegisters registers = user_registers(*e);
      if (registers.ip()) {
        const auto unwind_start = std::chrono::steady_clock::now();
        user = unwinder_->unwind(pid.value, tid.value, registers, e->stack, stack_size, kMaxUnwoundFrames);
        record_unwind_time(rec.stats, static_cast<uint32_t>(std::min<int64_t>(
            std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - unwind_start).count(),
            UINT32_MAX)));
        const uint64_t more_needed = (e->flags & BPFPROF_STACK_COPY_AT_LIMIT) ? user.stack_bytes_needed : 0;
        count_stack_copy(rec.stats, size, stack_size, more_needed != 0);
        if (sizer_) sizer_->observe(pid, more_needed, e->stack_copy_limit);
      }
      // Same layout as a frame-pointer sample: user frames, then kernel frames.
      std::vector<uint64_t>& ips = scratch_ips_;
      ips.assign(user.pcs.begin(), user.pcs.end());
      const uint32_t kernel = std::min<uint32_t>(e->kernel_depth, BPFPROF_MAX_STACK_DEPTH);
      ips.insert(ips.end(), e->kernel_ips, e->kernel_ips + kernel);
      RawStackId stack = intern_stack(rec.raw_stacks, ips.data(), ips.size(), static_cast<uint32_t>(user.pcs.size()), kernel);
      if (switch_out) {
        OffCpuState state = e->state >= 1 && e->state <= 3 ? static_cast<OffCpuState>(e->state) : OffCpuState::kSleeping;
        rec.samples.push_back(SampleRecord{time, pid, tid, Cpu{header.cpu}, CpuTimeNs{e->cpu_time_ns}, stack,
                                           SampleKind::kSwitchOut, state,
                                           (e->flags & BPFPROF_SWITCH_STACK_REUSED) != 0});
        ++rec.stats.switch_outs;
      } else {
        rec.samples.push_back(SampleRecord{time, pid, tid, Cpu{header.cpu}, CpuTimeNs{e->cpu_time_ns}, stack});
        ++rec.stats.samples;
        if (!rec.stats.first_sample_time.value) rec.stats.first_sample_time = time;
      }
      break;
    }
    case BPFPROF_EVENT_SWITCH_OUT: {
      constexpr size_t kFixed = offsetof(bpfprof_switch_out_event, ips);
      if (size < kFixed) return;
      const auto* e = static_cast<const bpfprof_switch_out_event*>(data);
      RawStackId stack = intern_stack(rec.raw_stacks, reinterpret_cast<const uint64_t*>(e->ips), (size - kFixed) / sizeof(uint64_t), e->user_depth, e->kernel_depth);
      OffCpuState state = e->state >= 1 && e->state <= 3 ? static_cast<OffCpuState>(e->state) : OffCpuState::kSleeping;
      rec.samples.push_back(SampleRecord{time, pid, tid, Cpu{header.cpu}, CpuTimeNs{e->cpu_time_ns}, stack,
                                         SampleKind::kSwitchOut, state,
                                         (e->flags & BPFPROF_SWITCH_STACK_REUSED) != 0});
      ++rec.stats.switch_outs;
      break;
    }
    case BPFPROF_EVENT_SWITCH_IN:
      rec.samples.push_back(SampleRecord{time, pid, tid, Cpu{header.cpu}, CpuTimeNs{0}, RawStackTree::kRoot,
                                         SampleKind::kSwitchIn});
      break;
    case BPFPROF_EVENT_FORK: {
      if (size < sizeof(bpfprof_fork_event)) return;
      const auto* e = static_cast<const bpfprof_fork_event*>(data);
      if (unwinder_ && e->child_pid != header.pid) unwinder_->copy(pid.value, static_cast<int>(e->child_pid));
      if (sizer_ && e->child_pid != header.pid) sizer_->on_fork(pid, Pid{static_cast<int32_t>(e->child_pid)});
      rec.events.push_back(LifecycleEvent{
          time, ForkEvent{pid, tid, Pid{static_cast<int32_t>(e->child_pid)}, Tid{static_cast<int32_t>(e->child_tid)},
                          bounded_string(e->child_comm, sizeof(e->child_comm))}});
      break;
    }
    case BPFPROF_EVENT_EXEC: {
      if (size < sizeof(bpfprof_exec_event)) return;
      const auto* e = static_cast<const bpfprof_exec_event*>(data);
      if (sizer_) sizer_->on_exec(pid, program_identity(bounded_string(e->filename, sizeof(e->filename))));
      rec.events.push_back(LifecycleEvent{
          time, ExecEvent{pid, tid, Tid{static_cast<int32_t>(e->old_tid)}, bounded_string(e->comm, sizeof(e->comm)),
                          bounded_string(e->filename, sizeof(e->filename))}});
      break;
    }
    case BPFPROF_EVENT_EXIT: {
      if (size < sizeof(bpfprof_exit_event)) return;
      const auto* e = static_cast<const bpfprof_exit_event*>(data);
      rec.events.push_back(LifecycleEvent{time, ExitEvent{pid, tid, CpuTimeNs{e->cpu_time_ns}, e->exit_code,
                                                          e->group_dead != 0, bounded_string(e->comm, sizeof(e->comm))}});
      if (unwinder_ && e->group_dead) exited_processes_.push_back(pid.value);
      if (sizer_ && e->group_dead) sizer_->on_exit(pid);
      break;
    }
    case BPFPROF_EVENT_COMM: {
      if (size < sizeof(bpfprof_comm_event)) return;
      const auto* e = static_cast<const bpfprof_comm_event*>(data);
      rec.events.push_back(LifecycleEvent{time, CommEvent{pid, tid, bounded_string(e->comm, sizeof(e->comm))}});
      break;
    }
    default:
      break;
  }
}

void EventDecoder::forget_exited_processes() {
  if (unwinder_)
    for (int pid : exited_processes_) unwinder_->remove(pid);
  exited_processes_.clear();
}

void update_unwinder_mappings(DwarfUnwinder& unwinder, const std::vector<LifecycleEvent>& events, size_t from) {
  for (size_t i = from; i < events.size(); ++i) {
    if (const auto* reset = std::get_if<AddressSpaceResetEvent>(&events[i].payload)) {
      unwinder.reset(reset->pid.value);
    } else if (const auto* mmap = std::get_if<MmapEvent>(&events[i].payload)) {
      const MappingInfo& m = mmap->mapping;
      unwinder.add_mapping(mmap->pid.value, m.start, m.start + m.length, m.file_offset,
                           m.access_path.empty() ? m.path : m.access_path);
    }
  }
}

}  // namespace bpfprof
