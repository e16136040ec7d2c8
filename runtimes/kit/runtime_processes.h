// A runtime's processes: which recorded processes run it (RuntimeProcessTracker), what the
// runtime found in each (`Process`: its interpreter's addresses, its layout) and, for the BPF
// side's map of the runtime, the changes to make (an `Entry` put for each process found,
// none for each gone). A runtime's processes class derives from this and says what a mapping
// of one of its files finds (on_mapping).
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "runtimes/kit/process_tracker.h"
#include "userspace/model/recording.h"

namespace bpfprof {

template <typename Process, typename Entry>
class RuntimeProcesses {
 public:
  // `is_runtime_file`: whether a mapped file's base name is one of the runtime's.
  explicit RuntimeProcesses(std::function<bool(const std::string&)> is_runtime_file)
      : tracker_(std::move(is_runtime_file)) {}
  virtual ~RuntimeProcesses() = default;
  RuntimeProcesses(const RuntimeProcesses&) = delete;
  RuntimeProcesses& operator=(const RuntimeProcesses&) = delete;

  // Mappings of new and existing processes, execs and exits, from events[from] on.
  void observe(const std::vector<LifecycleEvent>& events, size_t from, RuntimeStats& stats) {
    tracker_.observe(
        events, from, [&](Pid pid, const MappingInfo& mapping) { on_mapping(pid, mapping, stats); },
        [&](Pid pid) { forget(pid); });
  }
  // Processes that exited since the last call are forgotten (their last samples may come in
  // the same batch as their exit, so not at once); returns them.
  std::vector<Pid> forget_exited() {
    std::vector<Pid> exited = tracker_.take_exited();
    for (Pid pid : exited) forget(pid);
    return exited;
  }
  const Process* find(Pid pid) const {
    auto it = processes_.find(pid);
    return it == processes_.end() ? nullptr : &it->second;
  }

  // For the kernel side: processes found (an entry) and processes gone (none).
  struct Change {
    Pid pid;
    std::optional<Entry> entry;
  };
  std::vector<Change> take_changes() { return std::exchange(changes_, {}); }

 protected:
  // A mapping of one of the runtime's files by a recorded process (each one, also of a
  // process found already).
  virtual void on_mapping(Pid pid, const MappingInfo& mapping, RuntimeStats& stats) = 0;
  // `pid` is forgotten (exited, exec'd): what the derived class keeps of it goes too.
  virtual void forgetting(Pid) {}

  bool contains(Pid pid) const { return processes_.contains(pid); }
  // `pid` runs the runtime as `process`: the kernel side gets `entry`. False when known.
  bool add(Pid pid, Process process, const Entry& entry) {
    if (!processes_.emplace(pid, std::move(process)).second) return false;
    changes_.push_back(Change{pid, entry});
    return true;
  }
  // What was found of known process `pid` changed (a JIT's code found later): its new state,
  // and its new entry for the kernel side. False when it is not known.
  bool replace(Pid pid, Process process, const Entry& entry) {
    auto it = processes_.find(pid);
    if (it == processes_.end()) return false;
    it->second = std::move(process);
    changes_.push_back(Change{pid, entry});
    return true;
  }

 private:
  void forget(Pid pid) {
    forgetting(pid);
    if (processes_.erase(pid)) changes_.push_back(Change{pid, std::nullopt});
  }

  RuntimeProcessTracker tracker_;
  std::unordered_map<Pid, Process> processes_;
  std::vector<Change> changes_;
};

}  // namespace bpfprof
