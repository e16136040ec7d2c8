// A language runtime whose own frames bpfprof reads in place of its interpreter's or JIT's
// native frames (CPython, HotSpot, V8, CRuby). Each runtime is one folder, runtimes/<name>/:
// it recognises its processes from their mappings, tells the BPF side where to find their
// frames, takes the frame events its BPF reader (runtimes/<name>/frames.bpf.h) sends, and
// merges its frames into the native stacks. What runtimes share (reading another process's
// memory, merging, the per-thread and per-process bookkeeping) is in runtimes/kit/. The
// capture layer knows runtimes only through this interface and the list in
// runtimes/registry.cpp.
//
// A runtime's kernel ABI lives in its folder too: its frame event, process entry and constants
// in runtimes/<name>/events.h (plain C, shared by its BPF reader and userspace), its maps in
// its .bpf.h. Outside its folder (tests, docs, bench and scripts aside) a new runtime touches
// four files: bpf/runtime_list.h (its line), runtimes/kernel_side.bpf.h (its reader's include,
// and its start and step if the walker steps through its code), runtimes/registry.cpp (its
// factory) and runtimes/sources.cmake (its sources).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_set>
#include <vector>

#include "userspace/model/recording.h"

namespace bpfprof {

// The kernel side of the runtimes, as the capture layer that holds the BPF object offers it.
class RuntimeKernelMaps {
 public:
  virtual ~RuntimeKernelMaps() = default;
  // Puts (or replaces) the entry of `pid` in the BPF hash map `map`; false when refused.
  virtual bool put(const char* map, Pid pid, const void* value, size_t size) = 0;
  virtual void erase(const char* map, Pid pid) = 0;
  // How many of `runtime`'s processes the kernel side knows: with none it skips the runtime.
  virtual void set_process_count(RuntimeKind runtime, uint32_t count) = 0;
};

// A runtime's processes into its BPF map `map`: each change (Change{pid, optional entry})
// puts the process's entry, or erases it (none: exited, exec'd). The kernel's count follows,
// after an entry is in and before one is gone, so that a sample never misses an entry it
// needs. `in_kernel`: the map's processes. An entry the map refuses is a note in `stats`.
template <typename Change>
void apply_process_changes(RuntimeKernelMaps& maps, const char* map, RuntimeKind kind,
                           const std::vector<Change>& changes, std::unordered_set<Pid>& in_kernel,
                           RuntimeStats& stats) {
  for (const Change& change : changes) {
    if (!change.entry) {
      maps.erase(map, change.pid);
      in_kernel.erase(change.pid);
    } else if (maps.put(map, change.pid, &*change.entry, sizeof(*change.entry))) {
      in_kernel.insert(change.pid);
    } else {
      stats.not_read.emplace("pid " + std::to_string(change.pid.value),
                             std::string("the kernel's table ") + map + " is full");
    }
    maps.set_process_count(kind, static_cast<uint32_t>(in_kernel.size()));
  }
}

class Runtime {
 public:
  virtual ~Runtime() = default;
  virtual RuntimeKind kind() const = 0;

  // Recognises the runtime's processes among the lifecycle events from events[from] on
  // (mappings, execs, exits of recorded processes).
  virtual void observe(const std::vector<LifecycleEvent>& events, size_t from,
                       Recording& recording) = 0;
  // Processes that exited since the last call are forgotten.
  virtual void forget_exited() = 0;
  // Tells the kernel side about processes found or gone since the last call.
  virtual void apply_kernel_changes(RuntimeKernelMaps& maps, Recording& recording) = 0;
  // Whether a process found is still being set up (its tables read again at the runtime's
  // own pace until they are ready): the recorder calls apply_kernel_changes sooner meanwhile,
  // as each sample until then has the interpreter's frames in place of the runtime's.
  virtual bool setting_up() const { return false; }

  // The ring-buffer event kind its BPF reader sends (enum bpfprof_event_kind): a thread's
  // frames, just before the sample or off-CPU stack they belong to.
  uint32_t event_kind() const { return runtime_description(kind()).event_kind; }
  virtual void take_event(const void* data, size_t size, Recording& recording) = 0;
  // `user`: the native user stack of the sample of `tid` at `time`, innermost first; the
  // runtime's frames sent for it, if any, replace its interpreter frames.
  virtual void merge_into(Pid pid, Tid tid, MonotonicNs time, std::vector<uint64_t>& user,
                          Recording& recording) = 0;
};

}  // namespace bpfprof
