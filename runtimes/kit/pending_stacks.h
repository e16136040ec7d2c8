// The frames a runtime's BPF reader sends for a thread (one ring-buffer event, with the same
// header as the sample or off-CPU stack that follows it), kept per thread until that stack
// comes: each runtime's take_event copies the event bounded and puts its frames here; its
// merge_into takes them for the stack they were sent for.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <optional>
#include <type_traits>
#include <unordered_map>
#include <utility>

#include "bpf/events.h"
#include "userspace/model/recording.h"

namespace bpfprof {

// A runtime's frame event (a bpfprof_event_header `header`, then an array `frames`) copied
// from the ring buffer into `event`: its fixed part, and how many frames of it to use, as many
// as the event's own count (`count`) says, its size holds and the array has room for.
// nullopt: the event is shorter than its fixed part.
template <typename Event, typename Count>
std::optional<size_t> copy_frame_event(const void* data, size_t size, Event& event,
                                       Count Event::*count) {
  using Frame = std::remove_extent_t<decltype(Event::frames)>;
  constexpr size_t kFixed = offsetof(Event, frames);
  constexpr size_t kMaxFrames = std::extent_v<decltype(Event::frames)>;
  static_assert(std::is_standard_layout_v<Event> && offsetof(Event, header) == 0 &&
                    std::is_same_v<decltype(Event::header), bpfprof_event_header> && kMaxFrames > 0,
                "a runtime's frame event begins with its header and ends with its frames");
  if (size < kFixed) return std::nullopt;
  std::memcpy(&event, data, std::min(size, sizeof(event)));
  return std::min<size_t>({event.*count, kMaxFrames, (size - kFixed) / sizeof(Frame)});
}

// One frame event of `size` bytes in the runtime's summary: a stack read, of at most
// `max_frames` frames.
inline void count_frame_event(RuntimeStats& stats, size_t size, uint32_t max_frames) {
  ++stats.stacks;
  stats.max_frames = max_frames;
  stats.event_bytes += size;
}

// The frames waiting for their stack, one entry per thread: `Stack` holds `Pid pid` and
// `MonotonicNs time` (the event header's) and the runtime's frames.
template <typename Stack>
class PendingStacks {
 public:
  // The entry of the event's thread with the header's pid and time; its frames are the
  // previous event's (a stack never came for it) until the caller sets them.
  Stack& put(const bpfprof_event_header& header) {
    Stack& stack = pending_[Tid{static_cast<int32_t>(header.tid)}];
    stack.pid = Pid{static_cast<int32_t>(header.pid)};
    stack.time = MonotonicNs{header.timestamp_ns};
    return stack;
  }
  bool contains(Tid tid) const { return pending_.contains(tid); }
  // The frames of `tid` go: those sent for this stack of `pid` at `time`, or nullopt (none
  // sent, or sent for a stack that never came).
  std::optional<Stack> take(Pid pid, Tid tid, MonotonicNs time) {
    auto found = pending_.find(tid);
    if (found == pending_.end()) return std::nullopt;
    Stack stack = std::move(found->second);
    pending_.erase(found);
    if (stack.pid != pid || stack.time != time) return std::nullopt;
    return stack;
  }
  // Frames whose stack never came (lost in a full ring buffer) would stay forever.
  void forget(Pid pid) {
    std::erase_if(pending_, [&](const auto& entry) { return entry.second.pid == pid; });
  }

 private:
  std::unordered_map<Tid, Stack> pending_;
};

}  // namespace bpfprof
