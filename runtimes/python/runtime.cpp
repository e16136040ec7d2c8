#include "runtimes/python/runtime.h"

#include "runtimes/kit/split_runtime.h"
#include "runtimes/python/processes.h"
#include "runtimes/python/stacks.h"

namespace bpfprof {
namespace {

class PythonRuntime final : public SplitRuntime<PythonProcesses, PythonStacks> {
 public:
  PythonRuntime() : SplitRuntime(RuntimeKind::kPython, "python_processes") {}

  // The BPF side reads the frames of the interpreters found, and forgets those that exited
  // or exec'd (their pids may be reused by other programs).
  void apply_kernel_changes(RuntimeKernelMaps& maps, Recording& recording) override {
    apply(maps, processes_.take_changes(), recording);
  }
};

}  // namespace

std::unique_ptr<Runtime> make_python_runtime() { return std::make_unique<PythonRuntime>(); }

}  // namespace bpfprof
