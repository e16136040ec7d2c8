#include "runtimes/v8/runtime.h"

#include <string>
#include <unordered_set>

#include "bpf/events.h"
#include "runtimes/v8/processes.h"
#include "runtimes/v8/stacks.h"

namespace bpfprof {
namespace {

class V8Runtime final : public Runtime {
 public:
  RuntimeKind kind() const override { return RuntimeKind::kV8; }

  void observe(const std::vector<LifecycleEvent>& events, size_t from,
               Recording& recording) override {
    processes_.observe(events, from, stats(recording));
  }

  void forget_exited() override {
    for (Pid pid : processes_.forget_exited()) stacks_.forget(pid);
  }

  void apply_kernel_changes(RuntimeKernelMaps& maps, Recording& recording) override {
    const auto changes = processes_.take_changes(stats(recording));
    for (const v8::V8Processes::Change& change : changes)
      if (change.entry) stats(recording).interpreters += 1;
    apply_process_changes(maps, kMap, kind(), changes, in_kernel_, stats(recording));
  }

  void take_event(const void* data, size_t size, Recording& recording) override {
    stacks_.take_event(data, size, stats(recording));
  }

  void merge_into(Pid pid, Tid tid, MonotonicNs time, std::vector<uint64_t>& user,
                  Recording& recording) override {
    if (stacks_.has_frames_for(tid)) stacks_.merge_into(pid, tid, time, user, recording);
  }

 private:
  static constexpr const char* kMap = "v8_processes";
  static RuntimeStats& stats(Recording& recording) {
    return recording.stats.runtimes[RuntimeKind::kV8];
  }

  v8::V8Processes processes_;
  v8::V8Stacks stacks_{processes_};
  std::unordered_set<Pid> in_kernel_;
};

}  // namespace

std::unique_ptr<Runtime> make_v8_runtime() { return std::make_unique<V8Runtime>(); }

}  // namespace bpfprof
