// Which wakers ended a process's waits, and how long those waits were: totals by waking
// thread and by interrupt stack, and for a sliding window the same by second.
#pragma once

#include <cstdint>
#include <deque>
#include <unordered_map>
#include <utility>

#include "userspace/model/ids.h"
#include "userspace/model/recording.h"
#include "userspace/model/thread_accounting.h"

namespace bpfprof {

// Per process: the waiting time each waker ended (every woken wait, however short).
struct WakerShare {
  uint64_t waited_ns = 0;
  uint64_t wakings = 0;
};

// A process's waker shares of the waits woken within one second (SessionModel::
// keep_wakers_by_second).
struct WakerSecond {
  uint64_t second = 0;  // MonotonicNs / 1e9
  std::unordered_map<WakerId, WakerShare> wakers;
  std::unordered_map<StackId, WakerShare> interrupt_wakers;
};

// The bucket of waker shares for the second of `t` among `seconds` (oldest first), made if
// need be.
WakerSecond& waker_second(std::deque<WakerSecond>& seconds, MonotonicNs t);

// The seconds of waker shares that ended by `t` leave `seconds`, and their shares the totals.
void forget_waker_seconds_before(std::deque<WakerSecond>& seconds,
                                 std::unordered_map<WakerId, WakerShare>& wakers,
                                 std::unordered_map<StackId, WakerShare>& interrupt_wakers,
                                 MonotonicNs t);

// Shares by stack with their stacks renumbered by `move` (a compaction): those whose stacks
// become one are summed.
template <typename Move>
void move_share_stacks(std::unordered_map<StackId, WakerShare>& shares, Move&& move) {
  std::unordered_map<StackId, WakerShare> by_stack;
  for (const auto& [stack, share] : shares) {
    WakerShare& moved_share = by_stack[move(stack)];
    moved_share.waited_ns += share.waited_ns;
    moved_share.wakings += share.wakings;
  }
  shares = std::move(by_stack);
}

}  // namespace bpfprof
