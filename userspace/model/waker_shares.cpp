#include "userspace/model/waker_shares.h"

#include <algorithm>
#include <iterator>

namespace bpfprof {

namespace {

template <typename Key>
void subtract_shares(std::unordered_map<Key, WakerShare>& totals,
                     const std::unordered_map<Key, WakerShare>& part) {
  for (const auto& [key, share] : part) {
    auto it = totals.find(key);
    if (it == totals.end()) continue;
    it->second.waited_ns -= std::min(it->second.waited_ns, share.waited_ns);
    it->second.wakings -= std::min(it->second.wakings, share.wakings);
    if (!it->second.wakings) totals.erase(it);
  }
}

}  // namespace

// Waits end in the order threads run again, not quite in the order they were woken: the
// search goes from the end.
WakerSecond& waker_second(std::deque<WakerSecond>& seconds, MonotonicNs t) {
  const uint64_t second = t.value / 1000000000;
  auto it = seconds.end();
  while (it != seconds.begin() && std::prev(it)->second > second) --it;
  if (it != seconds.begin() && std::prev(it)->second == second) return *std::prev(it);
  return *seconds.insert(it, WakerSecond{second, {}, {}});
}

void forget_waker_seconds_before(std::deque<WakerSecond>& seconds,
                                 std::unordered_map<WakerId, WakerShare>& wakers,
                                 std::unordered_map<StackId, WakerShare>& interrupt_wakers,
                                 MonotonicNs t) {
  while (!seconds.empty() && (seconds.front().second + 1) * 1000000000 <= t.value) {
    subtract_shares(wakers, seconds.front().wakers);
    subtract_shares(interrupt_wakers, seconds.front().interrupt_wakers);
    seconds.pop_front();
  }
}

}  // namespace bpfprof
