#include "runtimes/kit/process_tracker.h"

#include <utility>

#include "symbols/util/text.h"

namespace bpfprof {

void RuntimeProcessTracker::observe(const std::vector<LifecycleEvent>& events, size_t from,
                                    const OnMapping& mapped, const OnExec& exec) {
  for (size_t i = from; i < events.size(); ++i) {
    const LifecyclePayload& payload = events[i].payload;
    if (const auto* mmap = std::get_if<MmapEvent>(&payload)) {
      if (!is_runtime_file_(base_name(mmap->mapping.path))) continue;
      if (tracked_.contains(mmap->pid)) {
        mapped_by_tracked(mmap->pid, events[i].time, mmap->mapping, mapped);
        continue;
      }
      if (pending_.size() >= kMaxPendingProcesses && !pending_.contains(mmap->pid))
        pending_.clear();
      std::vector<MappingInfo>& waiting = pending_[mmap->pid];
      if (waiting.size() < kMaxPendingMappings) waiting.push_back(mmap->mapping);
    } else if (const auto* fork = std::get_if<ForkEvent>(&payload);
               fork && fork->child_pid != fork->parent_pid) {
      forked(*fork, events[i].time, mapped);
    } else if (const std::optional<Pid> known = process_made_known_by(payload)) {
      tracked_.insert(*known);
      auto waiting = pending_.extract(*known);
      if (!waiting.empty())
        for (const MappingInfo& mapping : waiting.mapped()) give(*known, mapping, mapped);
    } else if (const auto* reset = std::get_if<AddressSpaceResetEvent>(&payload)) {
      exec(reset->pid);
      pending_.erase(reset->pid);
      runtime_mappings_.erase(reset->pid);
      forks_.forget(reset->pid);
    } else if (const auto* exit = std::get_if<ExitEvent>(&payload)) {
      if (exit->group_dead) exited_.push_back(exit->pid);
    }
  }
}

void RuntimeProcessTracker::give(Pid pid, const MappingInfo& mapping, const OnMapping& mapped) {
  std::vector<MappingInfo>& kept = runtime_mappings_[pid];
  for (const MappingInfo& k : kept)
    if (k.start == mapping.start && k.path == mapping.path) return;
  if (kept.size() < kMaxPendingMappings) kept.push_back(mapping);
  mapped(pid, mapping);
}

// The child's own mappings (of an exec that the side band reported first) are newer than the
// address space it inherited; otherwise it runs what its parent mapped.
void RuntimeProcessTracker::forked(const ForkEvent& fork, MonotonicNs time,
                                   const OnMapping& mapped) {
  const Pid child = fork.child_pid;
  tracked_.insert(child);
  auto waiting = pending_.extract(child);
  if (!waiting.empty()) {
    for (const MappingInfo& mapping : waiting.mapped()) give(child, mapping, mapped);
    return;
  }
  if (!tracked_.contains(fork.parent_pid)) return;
  forks_.forked(fork.parent_pid, child, time);
  auto parent = runtime_mappings_.find(fork.parent_pid);
  if (parent == runtime_mappings_.end()) return;
  const std::vector<MappingInfo> inherited = parent->second;  // give() may grow the map
  for (const MappingInfo& mapping : inherited) give(child, mapping, mapped);
}

// Also to the children forked after it was mapped (the side band may come after their fork).
void RuntimeProcessTracker::mapped_by_tracked(Pid pid, MonotonicNs time, const MappingInfo& mapping,
                                              const OnMapping& mapped) {
  give(pid, mapping, mapped);
  for (Pid child : forks_.forked_after(pid, time)) give(child, mapping, mapped);
}

std::vector<Pid> RuntimeProcessTracker::take_exited() {
  for (Pid pid : exited_) {
    tracked_.erase(pid);
    pending_.erase(pid);
    runtime_mappings_.erase(pid);
    forks_.forget_parent(pid);
  }
  return std::exchange(exited_, {});
}

}  // namespace bpfprof
