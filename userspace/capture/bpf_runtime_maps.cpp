// The runtimes' per-process maps in the kernel, as the runtimes (runtimes/runtime.h) change
// them.
#include <bpf/libbpf.h>

#include "bpf/events.h"
#include "profiler.skel.h"
#include "userspace/capture/bpf_programs.h"

namespace bpfprof {

namespace {

// The runtimes' per-process maps (runtimes/<name>/frames.bpf.h), by name, and their counts.
class SkeletonRuntimeMaps final : public RuntimeKernelMaps {
 public:
  explicit SkeletonRuntimeMaps(profiler_bpf* skeleton) : skeleton_(skeleton) {}

  bool put(const char* map, Pid pid, const void* value, size_t size) override {
    const uint32_t key = static_cast<uint32_t>(pid.value);
    bpf_map* found = bpf_object__find_map_by_name(skeleton_->obj, map);
    return found && bpf_map__update_elem(found, &key, sizeof(key), value, size, BPF_ANY) == 0;
  }
  void erase(const char* map, Pid pid) override {
    const uint32_t key = static_cast<uint32_t>(pid.value);
    if (bpf_map* found = bpf_object__find_map_by_name(skeleton_->obj, map))
      bpf_map__delete_elem(found, &key, sizeof(key), 0);
  }
  void set_process_count(RuntimeKind runtime, uint32_t count) override {
    const auto index = static_cast<size_t>(runtime);
    if (index < BPFPROF_RUNTIMES) skeleton_->bss->runtime_processes[index] = count;
  }

 private:
  profiler_bpf* skeleton_;
};

}  // namespace

bool BpfPrograms::runtime_processes_known() const {
  for (uint32_t count : skeleton_->bss->runtime_processes)
    if (count) return true;
  return false;
}

void BpfPrograms::apply_runtime_changes(IngestPipeline& pipeline) {
  SkeletonRuntimeMaps maps(skeleton_.get());
  pipeline.runtimes().apply_kernel_changes(maps, pipeline.recording(), take_full_walkers());
}

}  // namespace bpfprof
