// How many bytes of each process's user stack the kernel side copies per sample (DWARF
// mode). Every process starts at the configured size; one whose stack is cut where the copy
// ended (the unwinder needed bytes above it, and the stack went on) gets at least twice what
// that read needed, up to the largest copy, so that a program with a 20 KB frame or a deep
// stack is unwound completely without every other process paying for large copies.
#pragma once

#include <algorithm>
#include <cstdint>
#include <unordered_map>

#include "userspace/ids.h"

namespace bpfprof {

class StackCopySizer {
 public:
  StackCopySizer(uint32_t initial_bytes, uint32_t max_bytes) : initial_(initial_bytes), max_(max_bytes) {}

  // One unwound sample of `pid` whose copy held `copied_bytes`; `bytes_needed` is non-zero
  // when the copy ended below the end of the stack and the unwinder needed that many. True
  // when this raised the process's size (see bytes_for).
  bool observe(Pid pid, uint64_t bytes_needed, uint32_t copied_bytes) {
    if (bytes_needed == 0) return false;
    State& state = processes_.try_emplace(pid, State{initial_}).first->second;
    // Samples copied before the last raise (still in flight then) say nothing of the new size.
    if (copied_bytes < state.bytes || state.bytes >= max_) return false;
    uint64_t bytes = uint64_t{state.bytes} * 2;
    while (bytes < 2 * bytes_needed && bytes < max_) bytes *= 2;
    state.bytes = static_cast<uint32_t>(std::min<uint64_t>(bytes, max_));
    return true;
  }
  uint32_t bytes_for(Pid pid) const {
    auto it = processes_.find(pid);
    return it == processes_.end() ? initial_ : it->second.bytes;
  }

 private:
  struct State {
    uint32_t bytes;
  };
  uint32_t initial_;
  uint32_t max_;
  std::unordered_map<Pid, State> processes_;
};

}  // namespace bpfprof
