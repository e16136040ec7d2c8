#include "runtimes/v8/runtime.h"

#include "runtimes/kit/split_runtime.h"
#include "runtimes/v8/processes.h"
#include "runtimes/v8/stacks.h"

namespace bpfprof {
namespace {

class V8Runtime final : public SplitRuntime<v8::V8Processes, v8::V8Stacks> {
 public:
  V8Runtime() : SplitRuntime(RuntimeKind::kV8, "v8_processes") {}

  void apply_kernel_changes(RuntimeKernelMaps& maps, Recording& recording) override {
    const auto changes = processes_.take_changes(stats(recording));
    for (const v8::V8Processes::Change& change : changes)
      if (change.entry) stats(recording).interpreters += 1;
    apply(maps, changes, recording);
  }
  bool setting_up() const override { return processes_.waiting(); }
};

}  // namespace

std::unique_ptr<Runtime> make_v8_runtime() { return std::make_unique<V8Runtime>(); }

}  // namespace bpfprof
