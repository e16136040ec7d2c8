// Which recorded processes map a runtime's files, for runtimes/<name>/processes: the side band
// reports every process's mappings, but only recorded processes count (those the BPF side
// reports a fork, exec or start of, or found at attach): another user's programs named like an
// interpreter must neither fill the kernel's tables nor put notes into the summary. A
// runtime's mappings of a process not known yet wait for it, all of them: a shell's child
// that execs an interpreter maps its executable and its library before its fork is read, and
// the library may be the one that holds the runtime (a shared Python build's libpython).
// A process forked from one that runs the runtime (a multiprocessing worker, a zygote's
// renderer) maps nothing of its own: it gets its parent's runtime mappings at its fork, and
// those of the parent that the side band reports after the fork but dated before it.
// An exec read after mappings dated later than it (its ring was read after theirs) keeps them:
// they are the new image's.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "userspace/model/forked_children.h"
#include "userspace/model/recording.h"

namespace bpfprof {

class RuntimeProcessTracker {
 public:
  // `is_runtime_file`: whether a mapped file's base name is one of the runtime's.
  explicit RuntimeProcessTracker(std::function<bool(const std::string&)> is_runtime_file)
      : is_runtime_file_(std::move(is_runtime_file)) {}

  using OnMapping = std::function<void(Pid, const MappingInfo&)>;
  using OnExec = std::function<void(Pid)>;
  // The events from events[from] on: `mapped` for each mapping of a runtime file by a
  // recorded process (at once, when the process becomes known, or inherited at a fork),
  // `exec` when a process replaced its image (its entry goes: the new image's mappings
  // follow).
  void observe(const std::vector<LifecycleEvent>& events, size_t from, const OnMapping& mapped,
               const OnExec& exec);
  // The processes whose last thread exited since the last call (their last samples may come in
  // the same batch as their exit, so they are forgotten then, not at once); forgotten here.
  std::vector<Pid> take_exited();

  // Bounds: processes with mappings waiting, and mappings waiting for or kept of one process.
  static constexpr size_t kMaxPendingProcesses = 4096;
  static constexpr size_t kMaxPendingMappings = 16;

 private:
  struct DatedMapping {
    MonotonicNs time;
    MappingInfo mapping;
  };
  // `mapping` to `pid`, kept for its children, unless it has it already.
  void give(Pid pid, const DatedMapping& mapping, const OnMapping& mapped);
  void exec_read(Pid pid, MonotonicNs time, const OnMapping& mapped, const OnExec& exec);
  void forked(const ForkEvent& fork, MonotonicNs time, const OnMapping& mapped);
  void mapped_by_tracked(Pid pid, const DatedMapping& mapping, const OnMapping& mapped);

  std::function<bool(const std::string&)> is_runtime_file_;
  std::unordered_set<Pid> tracked_;
  std::unordered_map<Pid, std::vector<DatedMapping>> pending_;
  std::unordered_map<Pid, std::vector<DatedMapping>> runtime_mappings_;  // of tracked processes
  ForkedChildren forks_;  // the children that inherited their parent's runtime mappings
  std::vector<Pid> exited_;
};

}  // namespace bpfprof
