// The kernel side's counters (lost events, processes not followed, unwinding fallbacks) and
// the unwinder's map memory.
#include <bpf/libbpf.h>

#include <numeric>

#include "bpf/events.h"
#include "bpf/unwind_maps.h"
#include "profiler.skel.h"
#include "userspace/capture/bpf_programs.h"
#include "userspace/capture/bpf_unwind_maps.h"

namespace bpfprof {

UnwindMapsSink* BpfPrograms::unwind_maps() { return unwind_maps_.get(); }

uint64_t BpfPrograms::unwind_map_bytes() const { return unwind_maps_ ? unwind_maps_->bytes() : 0; }

std::vector<uint64_t> BpfPrograms::unwind_fallbacks() const {
  std::vector<uint64_t> by_reason(BPFPROF_FALLBACK_REASONS);
  const int cpus = libbpf_num_possible_cpus();
  if (cpus <= 0 || !unwind_maps_) return by_reason;
  std::vector<uint64_t> per_cpu(static_cast<size_t>(cpus));
  for (uint32_t reason = 0; reason < BPFPROF_FALLBACK_REASONS; ++reason)
    if (bpf_map__lookup_elem(skeleton_->maps.unwind_fallbacks, &reason, sizeof(reason),
                             per_cpu.data(), per_cpu.size() * sizeof(uint64_t), 0) == 0)
      for (uint64_t n : per_cpu) by_reason[reason] += n;
  return by_reason;
}

std::vector<uint64_t> BpfPrograms::per_cpu_counts(const bpf_map* map) const {
  int ncpus = libbpf_num_possible_cpus();
  if (ncpus <= 0) return {};
  std::vector<uint64_t> per_cpu(static_cast<size_t>(ncpus));
  uint32_t zero = 0;
  if (bpf_map__lookup_elem(map, &zero, sizeof(zero), per_cpu.data(),
                           per_cpu.size() * sizeof(uint64_t), 0))
    return {};
  return per_cpu;
}

std::vector<uint64_t> BpfPrograms::lost_events_per_cpu() const {
  return per_cpu_counts(skeleton_->maps.lost_events);
}

uint64_t BpfPrograms::processes_not_followed() const {
  const std::vector<uint64_t> per_cpu = per_cpu_counts(skeleton_->maps.processes_not_followed);
  return std::accumulate(per_cpu.begin(), per_cpu.end(), uint64_t{0});
}

uint64_t BpfPrograms::lost_events() const {
  return __atomic_load_n(&skeleton_->bss->lost_events_total, __ATOMIC_RELAXED);
}

std::unordered_map<Pid, uint64_t> BpfPrograms::lost_events_by_process() const {
  std::unordered_map<Pid, uint64_t> result;
  const bpf_map* map = skeleton_->maps.lost_events_by_process;
  uint32_t key = 0;
  uint32_t next = 0;
  const void* previous = nullptr;
  while (bpf_map__get_next_key(map, previous, &next, sizeof(next)) == 0) {
    uint64_t value = 0;
    if (bpf_map__lookup_elem(map, &next, sizeof(next), &value, sizeof(value), 0) == 0)
      result[Pid{static_cast<int32_t>(next)}] = value;
    key = next;
    previous = &key;
  }
  return result;
}

}  // namespace bpfprof
