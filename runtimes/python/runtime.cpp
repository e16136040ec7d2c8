#include "runtimes/python/runtime.h"

#include <string>
#include <unordered_set>

#include "bpf/events.h"
#include "runtimes/python/processes.h"
#include "runtimes/python/stacks.h"

namespace bpfprof {
namespace {

class PythonRuntime final : public Runtime {
 public:
  RuntimeKind kind() const override { return RuntimeKind::kPython; }

  void observe(const std::vector<LifecycleEvent>& events, size_t from,
               Recording& recording) override {
    processes_.observe(events, from, stats(recording));
  }

  void forget_exited() override {
    for (Pid pid : processes_.forget_exited()) stacks_.forget(pid);
  }

  // The BPF side reads the frames of the interpreters found, and forgets those that exited
  // or exec'd (their pids may be reused by other programs).
  void apply_kernel_changes(RuntimeKernelMaps& maps, Recording& recording) override {
    apply_process_changes(maps, kMap, kind(), processes_.take_changes(), in_kernel_,
                          stats(recording));
  }

  void take_event(const void* data, size_t size, Recording& recording) override {
    stacks_.take_event(data, size, stats(recording));
  }

  void merge_into(Pid pid, Tid tid, MonotonicNs time, std::vector<uint64_t>& user,
                  Recording& recording) override {
    if (stacks_.has_frames_for(tid)) stacks_.merge_into(pid, tid, time, user, recording);
  }

 private:
  static constexpr const char* kMap = "python_processes";
  static RuntimeStats& stats(Recording& recording) {
    return recording.stats.runtimes[RuntimeKind::kPython];
  }

  PythonProcesses processes_;
  PythonStacks stacks_{processes_};
  std::unordered_set<Pid> in_kernel_;  // the entries of the kernel's map
};

}  // namespace

std::unique_ptr<Runtime> make_python_runtime() { return std::make_unique<PythonRuntime>(); }

}  // namespace bpfprof
