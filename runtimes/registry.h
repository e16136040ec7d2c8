// The runtimes a recording reads the frames of (runtimes/runtime.h), in one list.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <set>
#include <vector>

#include "runtimes/runtime.h"

namespace bpfprof {

class Runtimes {
 public:
  // Every runtime bpfprof knows, but those in `disabled` (--no-python-frames, a replay).
  explicit Runtimes(const std::set<RuntimeKind>& disabled);
  ~Runtimes();
  Runtimes(const Runtimes&) = delete;
  Runtimes& operator=(const Runtimes&) = delete;

  void observe(const std::vector<LifecycleEvent>& events, size_t from, Recording& recording);
  void forget_exited();
  // The processes found or gone since the last call, told to the kernel side; those of the
  // runtimes read later (bpf/runtime_list.h) only once `late_readers_loaded` (till then theirs
  // wait).
  void apply_kernel_changes(RuntimeKernelMaps& maps, Recording& recording,
                            bool late_readers_loaded = true);
  bool setting_up() const;
  // Whether the event is a runtime's frames (then taken), else the caller decodes it.
  bool take_event(uint32_t kind, const void* data, size_t size, Recording& recording);
  void merge_into(Pid pid, Tid tid, MonotonicNs time, std::vector<uint64_t>& user,
                  Recording& recording);
  bool empty() const { return runtimes_.empty(); }

 private:
  std::vector<std::unique_ptr<Runtime>> runtimes_;
};

}  // namespace bpfprof
