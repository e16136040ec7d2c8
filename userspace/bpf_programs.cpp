#include "userspace/bpf_programs.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <stdexcept>

#include "bpf/events.h"
#include "profiler.skel.h"
#include "symbols/unwinder.h"

namespace bpfprof {

namespace {

std::string bounded_string(const char* s, size_t max) { return std::string(s, strnlen(s, max)); }

std::string errno_text(int err) { return strerror(err < 0 ? -err : err); }

}  // namespace

void BpfPrograms::SkeletonDeleter::operator()(profiler_bpf* skel) const { profiler_bpf__destroy(skel); }
void BpfPrograms::LinkDeleter::operator()(bpf_link* link) const { bpf_link__destroy(link); }
void BpfPrograms::RingBufferDeleter::operator()(ring_buffer* rb) const { ring_buffer__free(rb); }

BpfPrograms::BpfPrograms(bool track_all_processes, bool record_off_cpu, uint64_t sampling_interval_ns,
                         uint32_t user_stack_copy_bytes, DwarfUnwinder* unwinder)
    : unwinder_(unwinder) {
  libbpf_set_print([](enum libbpf_print_level level, const char* format, va_list args) -> int {
    if (level == LIBBPF_WARN && getenv("BPFPROF_DEBUG_BPF")) return vfprintf(stderr, format, args);
    return 0;
  });
  skeleton_.reset(profiler_bpf__open());
  if (!skeleton_) throw std::runtime_error("cannot open the BPF programs: " + errno_text(errno));
  skeleton_->rodata->track_all = track_all_processes ? 1 : 0;
  skeleton_->rodata->record_off_cpu = record_off_cpu ? 1 : 0;
  skeleton_->rodata->off_cpu_stack_interval_ns = sampling_interval_ns;
  skeleton_->rodata->user_stack_copy_bytes = unwinder ? user_stack_copy_bytes : 0;
  if (int err = profiler_bpf__load(skeleton_.get()))
    throw std::runtime_error("cannot load the BPF programs (" + errno_text(err) +
                             "); bpfprof needs root (CAP_BPF and CAP_PERFMON) and a kernel with BTF");
  ring_buffer_.reset(ring_buffer__new(bpf_map__fd(skeleton_->maps.events), &BpfPrograms::on_event, this, nullptr));
  if (!ring_buffer_) throw std::runtime_error("cannot set up the BPF ring buffer: " + errno_text(errno));
}

BpfPrograms::~BpfPrograms() = default;

void BpfPrograms::attach_lifecycle() {
  if (int err = profiler_bpf__attach(skeleton_.get()))
    throw std::runtime_error("cannot attach the process-lifecycle tracepoints: " + errno_text(err));
}

void BpfPrograms::attach_sampling(const std::vector<UniqueFd>& perf_event_fds) {
  for (const UniqueFd& fd : perf_event_fds) {
    bpf_link* link = bpf_program__attach_perf_event(skeleton_->progs.on_sample, fd.get());
    if (!link) throw std::runtime_error("cannot attach the sample program to a perf event: " + errno_text(errno));
    sample_links_.emplace_back(link);
  }
}

void BpfPrograms::detach_sampling() { sample_links_.clear(); }

void BpfPrograms::track_process(Pid pid) {
  uint32_t key = static_cast<uint32_t>(pid.value);
  uint8_t one = 1;
  if (bpf_map__update_elem(skeleton_->maps.tracked_processes, &key, sizeof(key), &one, sizeof(one), BPF_ANY))
    throw std::runtime_error("cannot track pid " + std::to_string(pid.value) + ": " + errno_text(errno));
}

int BpfPrograms::poll(Recording& recording, int timeout_ms) {
  target_ = &recording;
  int n = ring_buffer__poll(ring_buffer_.get(), timeout_ms);
  target_ = nullptr;
  return n;
}

int BpfPrograms::drain(Recording& recording) {
  target_ = &recording;
  int n = ring_buffer__consume(ring_buffer_.get());
  target_ = nullptr;
  return n;
}

uint64_t BpfPrograms::lost_events() const {
  int ncpus = libbpf_num_possible_cpus();
  if (ncpus <= 0) return 0;
  std::vector<uint64_t> per_cpu(static_cast<size_t>(ncpus));
  uint32_t zero = 0;
  if (bpf_map__lookup_elem(skeleton_->maps.lost_events, &zero, sizeof(zero), per_cpu.data(),
                           per_cpu.size() * sizeof(uint64_t), 0))
    return 0;
  uint64_t total = 0;
  for (uint64_t v : per_cpu) total += v;
  return total;
}

int BpfPrograms::on_event(void* context, void* data, size_t size) {
  static_cast<BpfPrograms*>(context)->decode(data, size);
  return 0;
}

// Unwound stacks are not bound by the kernel's frame-pointer walk limit.
constexpr size_t kMaxUnwoundFrames = 1024;

// Interns `ips` (user frames, then kernel frames, each innermost first) as a root-first path.
RawStackId BpfPrograms::intern_stack(const uint64_t* ips, size_t available, uint32_t user_depth,
                                     uint32_t kernel_depth) {
  RawStackTree& tree = target_->raw_stacks;
  size_t user = std::min<size_t>(user_depth, available);
  size_t kernel = std::min<size_t>(kernel_depth, available - user);
  // A frame-pointer walk that wanders into data yields non-canonical addresses; nothing
  // beyond such a frame is a real caller.
  size_t user_kept = 0;
  while (user_kept < user && is_user_address(ips[user_kept])) ++user_kept;
  RawStackId node = RawStackTree::kRoot;
  for (size_t i = user_kept; i-- > 0;)
    if (ips[i]) node = tree.intern(node, ips[i]);
  for (size_t i = user + kernel; i-- > user;)
    if (ips[i]) node = tree.intern(node, ips[i]);
  return node;
}

void BpfPrograms::decode(const void* data, size_t size) {
  if (!target_ || size < sizeof(bpfprof_event_header)) return;
  bpfprof_event_header header;
  memcpy(&header, data, sizeof(header));
  const MonotonicNs time{header.timestamp_ns};
  const Pid pid{static_cast<int32_t>(header.pid)};
  const Tid tid{static_cast<int32_t>(header.tid)};
  Recording& rec = *target_;

  switch (header.kind) {
    case BPFPROF_EVENT_SAMPLE: {
      constexpr size_t kFixed = offsetof(bpfprof_sample_event, ips);
      if (size < kFixed) return;
      const auto* e = static_cast<const bpfprof_sample_event*>(data);
      RawStackId stack = intern_stack(reinterpret_cast<const uint64_t*>(e->ips), (size - kFixed) / sizeof(uint64_t), e->user_depth, e->kernel_depth);
      rec.samples.push_back(SampleRecord{time, pid, tid, Cpu{header.cpu}, CpuTimeNs{e->cpu_time_ns}, stack});
      ++rec.stats.samples;
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
      if (e->user_ip) {
        const auto unwind_start = std::chrono::steady_clock::now();
        user = unwinder_->unwind(pid.value, tid.value, UserRegisters{e->user_ip, e->user_sp, e->user_bp}, e->stack,
                                 stack_size, kMaxUnwoundFrames);
        rec.stats.unwind_ns.push_back(static_cast<uint32_t>(std::min<int64_t>(
            std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - unwind_start).count(),
            UINT32_MAX)));
        rec.stats.dwarf_sample_bytes += size;
        ++rec.stats.user_stacks;
        if (user.complete)
          ++rec.stats.user_stacks_complete;
        else
          user.pcs.push_back(kTruncatedStackMarker);  // shown at the root
      }
      // Same layout as a frame-pointer sample: user frames, then kernel frames.
      std::vector<uint64_t> ips(user.pcs.begin(), user.pcs.end());
      const uint32_t kernel = std::min<uint32_t>(e->kernel_depth, BPFPROF_MAX_STACK_DEPTH);
      ips.insert(ips.end(), e->kernel_ips, e->kernel_ips + kernel);
      RawStackId stack = intern_stack(ips.data(), ips.size(), static_cast<uint32_t>(user.pcs.size()), kernel);
      if (switch_out) {
        OffCpuState state = e->state >= 1 && e->state <= 3 ? static_cast<OffCpuState>(e->state) : OffCpuState::kSleeping;
        rec.samples.push_back(SampleRecord{time, pid, tid, Cpu{header.cpu}, CpuTimeNs{e->cpu_time_ns}, stack,
                                           SampleKind::kSwitchOut, state,
                                           (e->flags & BPFPROF_SWITCH_STACK_REUSED) != 0});
        ++rec.stats.switch_outs;
      } else {
        rec.samples.push_back(SampleRecord{time, pid, tid, Cpu{header.cpu}, CpuTimeNs{e->cpu_time_ns}, stack});
        ++rec.stats.samples;
      }
      break;
    }
    case BPFPROF_EVENT_SWITCH_OUT: {
      constexpr size_t kFixed = offsetof(bpfprof_switch_out_event, ips);
      if (size < kFixed) return;
      const auto* e = static_cast<const bpfprof_switch_out_event*>(data);
      RawStackId stack = intern_stack(reinterpret_cast<const uint64_t*>(e->ips), (size - kFixed) / sizeof(uint64_t), e->user_depth, e->kernel_depth);
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
      rec.events.push_back(LifecycleEvent{
          time, ForkEvent{pid, tid, Pid{static_cast<int32_t>(e->child_pid)}, Tid{static_cast<int32_t>(e->child_tid)},
                          bounded_string(e->child_comm, sizeof(e->child_comm))}});
      break;
    }
    case BPFPROF_EVENT_EXEC: {
      if (size < sizeof(bpfprof_exec_event)) return;
      const auto* e = static_cast<const bpfprof_exec_event*>(data);
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

}  // namespace bpfprof
