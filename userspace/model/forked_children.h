// Which processes were forked from which, and when, while they run the image they were forked
// with. A fork maps nothing of its own: what its parent mapped before the fork is the child's
// too, also when the side band reports the mapping only after the fork event was read. The
// in-kernel unwinder's bookkeeping (whole mappings) and each runtime's process tracker (the
// runtime's files) apply this one rule.
#pragma once

#include <algorithm>
#include <unordered_map>
#include <utility>
#include <vector>

#include "userspace/model/ids.h"

namespace bpfprof {

class ForkedChildren {
 public:
  void forked(Pid parent, Pid child, MonotonicNs time) {
    parent_of_[child] = {parent, time};
    MonotonicNs& latest = latest_fork_[parent];
    latest = std::max(latest, time);
  }
  // `pid` exec'd or exited: it runs an image of its own now (or none).
  void forget(Pid pid) { parent_of_.erase(pid); }
  // `pid` exited: no child will be forked from it again either.
  void forget_parent(Pid pid) {
    forget(pid);
    latest_fork_.erase(pid);
  }

  // The children forked from `parent` after `time` that still run the image it had then.
  std::vector<Pid> forked_after(Pid parent, MonotonicNs time) const {
    std::vector<Pid> children;
    const auto latest = latest_fork_.find(parent);
    if (latest == latest_fork_.end() || time >= latest->second) return children;
    for (const auto& [child, fork] : parent_of_)
      if (fork.first == parent && time < fork.second) children.push_back(child);
    return children;
  }

 private:
  std::unordered_map<Pid, std::pair<Pid, MonotonicNs>> parent_of_;  // child -> parent, fork time
  std::unordered_map<Pid, MonotonicNs> latest_fork_;  // each parent's latest fork: a quick "none"
};

}  // namespace bpfprof
