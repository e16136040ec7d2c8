#include "userspace/model/recording.h"

namespace bpfprof {

std::string_view runtime_name(RuntimeKind runtime) {
  return static_cast<size_t>(runtime) < std::size(kRuntimeDescriptions)
             ? runtime_description(runtime).language
             : "?";
}

std::set<RuntimeKind> all_runtimes() {
  std::set<RuntimeKind> all;
  for (const RuntimeDescription& runtime : kRuntimeDescriptions) all.insert(runtime.kind);
  return all;
}

RuntimeFrameId RuntimeFrameTable::intern(const RuntimeFunction& function, uint32_t line) {
  const std::string key = std::string(runtime_name(function.runtime)) + ":" + function.filename +
                          ":" + std::to_string(function.first_line) + ":" + function.qualified_name;
  auto [found, added] = function_index_.try_emplace(key, static_cast<uint32_t>(functions_.size()));
  if (added) functions_.push_back(function);
  const uint64_t frame_key = uint64_t{found->second} << 32 | line;
  auto [frame, new_frame] =
      frame_index_.try_emplace(frame_key, RuntimeFrameId{static_cast<uint32_t>(frames_.size())});
  if (new_frame) frames_.push_back(RuntimeFrame{found->second, line});
  return frame->second;
}

RuntimeFrameId RuntimeFrameTable::intern_provisional(const RuntimeFunction& function) {
  functions_.push_back(function);
  frames_.push_back(RuntimeFrame{static_cast<uint32_t>(functions_.size() - 1), 0});
  return RuntimeFrameId{static_cast<uint32_t>(frames_.size() - 1)};
}

RuntimeFrameId RuntimeFrameTable::complete(RuntimeFrameId provisional,
                                           const RuntimeFunction& function, uint32_t line) {
  const RuntimeFrameId known = intern(function, line);
  frames_[provisional.value] = frames_[known.value];  // its function left unreferenced
  return known;
}

void RuntimeFrameTable::settle_first_lines() {
  // By runtime, file and name: the first line known, or 0 once two differ.
  std::unordered_map<std::string, uint32_t> known;
  auto key_of = [](const RuntimeFunction& f) {
    return std::string(runtime_name(f.runtime)) + ":" + f.filename + ":" + f.qualified_name;
  };
  for (const RuntimeFunction& f : functions_) {
    if (!f.first_line) continue;
    auto [it, added] = known.try_emplace(key_of(f), f.first_line);
    if (!added && it->second != f.first_line) it->second = 0;
  }
  for (RuntimeFunction& f : functions_) {
    if (f.first_line) continue;
    if (auto it = known.find(key_of(f)); it != known.end()) f.first_line = it->second;
  }
}

WakerId WakerTable::intern(const Waker& waker) {
  const std::string key = std::to_string(static_cast<int>(waker.context)) + ":" +
                          std::to_string(waker.pid.value) + ":" + std::to_string(waker.tid.value) +
                          ":" + waker.comm;
  auto [found, added] = index_.try_emplace(key, WakerId{static_cast<uint32_t>(wakers_.size())});
  if (added) wakers_.push_back(waker);
  return found->second;
}

Recording copy_without_pending(Recording& recording) {
  // Moved aside and back, so that a field added to Recording is copied without a change here.
  std::vector<LifecycleEvent> events = std::move(recording.events);
  std::deque<SampleRecord> samples = std::move(recording.samples);
  RawStackTree raw_stacks = std::move(recording.raw_stacks);
  recording.events.clear();
  recording.samples.clear();
  recording.raw_stacks = RawStackTree{};
  Recording copy = recording;
  recording.events = std::move(events);
  recording.samples = std::move(samples);
  recording.raw_stacks = std::move(raw_stacks);
  return copy;
}

}  // namespace bpfprof
