#include "runtimes/process_tracker.h"

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
        mapped(mmap->pid, mmap->mapping);
        continue;
      }
      if (pending_.size() >= kMaxPendingProcesses && !pending_.contains(mmap->pid))
        pending_.clear();
      std::vector<MappingInfo>& waiting = pending_[mmap->pid];
      if (waiting.size() < kMaxPendingMappings) waiting.push_back(mmap->mapping);
    } else if (const std::optional<Pid> known = process_made_known_by(payload)) {
      tracked_.insert(*known);
      auto waiting = pending_.extract(*known);
      if (!waiting.empty())
        for (const MappingInfo& mapping : waiting.mapped()) mapped(*known, mapping);
    } else if (const auto* reset = std::get_if<AddressSpaceResetEvent>(&payload)) {
      exec(reset->pid);
      pending_.erase(reset->pid);
    } else if (const auto* exit = std::get_if<ExitEvent>(&payload)) {
      if (exit->group_dead) exited_.push_back(exit->pid);
    }
  }
}

std::vector<Pid> RuntimeProcessTracker::take_exited() {
  for (Pid pid : exited_) {
    tracked_.erase(pid);
    pending_.erase(pid);
  }
  return std::exchange(exited_, {});
}

}  // namespace bpfprof
