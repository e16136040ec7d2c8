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
      const DatedMapping dated{events[i].time, mmap->mapping};
      if (tracked_.contains(mmap->pid)) {
        mapped_by_tracked(mmap->pid, dated, mapped);
        continue;
      }
      if (pending_.size() >= kMaxPendingProcesses && !pending_.contains(mmap->pid))
        pending_.clear();
      std::vector<DatedMapping>& waiting = pending_[mmap->pid];
      if (waiting.size() < kMaxPendingMappings) waiting.push_back(dated);
    } else if (const auto* fork = std::get_if<ForkEvent>(&payload);
               fork && fork->child_pid != fork->parent_pid) {
      forked(*fork, events[i].time, mapped);
    } else if (const std::optional<Pid> known = process_made_known_by(payload)) {
      tracked_.insert(*known);
      auto waiting = pending_.extract(*known);
      if (!waiting.empty())
        for (const DatedMapping& mapping : waiting.mapped()) give(*known, mapping, mapped);
    } else if (const auto* reset = std::get_if<AddressSpaceResetEvent>(&payload)) {
      exec_read(reset->pid, events[i].time, mapped, exec);
    } else if (const auto* exit = std::get_if<ExitEvent>(&payload)) {
      if (exit->group_dead) exited_.push_back(exit->pid);
    }
  }
}

// The mappings dated after the exec are the new image's, also when the exec is read after them.
void RuntimeProcessTracker::exec_read(Pid pid, MonotonicNs time, const OnMapping& mapped,
                                      const OnExec& exec) {
  auto older = [time](const DatedMapping& m) { return m.time.value <= time.value; };
  exec(pid);
  forks_.forget(pid);
  if (auto waiting = pending_.find(pid); waiting != pending_.end())
    std::erase_if(waiting->second, older);
  auto kept = runtime_mappings_.extract(pid);
  if (kept.empty()) return;
  std::erase_if(kept.mapped(), older);
  for (const DatedMapping& mapping : kept.mapped()) give(pid, mapping, mapped);
}

void RuntimeProcessTracker::give(Pid pid, const DatedMapping& mapping, const OnMapping& mapped) {
  std::vector<DatedMapping>& kept = runtime_mappings_[pid];
  for (const DatedMapping& k : kept)
    if (k.mapping.start == mapping.mapping.start && k.mapping.path == mapping.mapping.path) return;
  if (kept.size() < kMaxPendingMappings) kept.push_back(mapping);
  mapped(pid, mapping.mapping);
}

// The child's own mappings (of an exec that the side band reported first) are newer than the
// address space it inherited; otherwise it runs what its parent mapped.
void RuntimeProcessTracker::forked(const ForkEvent& fork, MonotonicNs time,
                                   const OnMapping& mapped) {
  const Pid child = fork.child_pid;
  tracked_.insert(child);
  auto waiting = pending_.extract(child);
  if (!waiting.empty()) {
    for (const DatedMapping& mapping : waiting.mapped()) give(child, mapping, mapped);
    return;
  }
  if (!tracked_.contains(fork.parent_pid)) return;
  forks_.forked(fork.parent_pid, child, time);
  auto parent = runtime_mappings_.find(fork.parent_pid);
  if (parent == runtime_mappings_.end()) return;
  const std::vector<DatedMapping> inherited = parent->second;  // give() may grow the map
  for (const DatedMapping& mapping : inherited) give(child, mapping, mapped);
}

// Also to the children forked after it was mapped (the side band may come after their fork).
void RuntimeProcessTracker::mapped_by_tracked(Pid pid, const DatedMapping& mapping,
                                              const OnMapping& mapped) {
  give(pid, mapping, mapped);
  for (Pid child : forks_.forked_after(pid, mapping.time)) give(child, mapping, mapped);
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
