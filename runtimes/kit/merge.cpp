#include "runtimes/kit/merge.h"

namespace bpfprof {
namespace {

MergedStack merge_from_innermost(std::span<const uint64_t> native,
                                 std::span<const ActivationFrame> runtime,
                                 const std::function<bool(uint64_t)>& runs_loop,
                                 bool innermost_loop_empty) {
  MergedStack merged;
  merged.frames.reserve(native.size() + runtime.size());
  size_t next = 0;  // the innermost runtime frame not placed yet
  bool skip_loop = innermost_loop_empty;
  for (uint64_t pc : native) {
    const bool loop = runs_loop(pc);
    if (!loop || skip_loop || next == runtime.size()) {
      merged.mismatched |= loop && !skip_loop && next == runtime.size();
      skip_loop &= !loop;
      merged.frames.push_back(pc);
      continue;
    }
    // This activation's frames: up to and including its entry frame.
    while (next < runtime.size()) {
      merged.frames.push_back(runtime[next].raw);
      ++merged.runtime_frames;
      if (runtime[next++].entry) break;
    }
  }
  merged.mismatched |= next != runtime.size();
  return merged;
}

MergedStack merge_from_outermost(std::span<const uint64_t> native,
                                 std::span<const ActivationFrame> runtime,
                                 const std::function<bool(uint64_t)>& runs_loop) {
  std::vector<std::span<const ActivationFrame>> calls;  // innermost first
  for (size_t start = 0, i = 0; i < runtime.size(); ++i) {
    if (runtime[i].entry || i + 1 == runtime.size()) {
      calls.push_back(runtime.subspan(start, i + 1 - start));
      start = i + 1;
    }
  }
  size_t loops = 0;
  for (uint64_t pc : native) loops += runs_loop(pc) ? 1 : 0;
  MergedStack merged;
  merged.mismatched = loops != calls.size();
  merged.frames.reserve(native.size() + runtime.size());
  size_t loop = 0;
  for (uint64_t pc : native) {
    if (!runs_loop(pc)) {
      merged.frames.push_back(pc);
      continue;
    }
    const size_t from_outermost = loops - 1 - loop++;
    if (from_outermost >= calls.size()) {
      merged.frames.push_back(pc);
      continue;
    }
    const auto& call = calls[calls.size() - 1 - from_outermost];
    for (const ActivationFrame& f : call) merged.frames.push_back(f.raw);
    merged.runtime_frames += call.size();
  }
  return merged;
}

}  // namespace

MergedStack merge_runtime_frames(std::span<const uint64_t> native,
                                 std::span<const ActivationFrame> runtime,
                                 const std::function<bool(uint64_t)>& runs_loop,
                                 ActivationMatch match, bool innermost_loop_empty) {
  return match == ActivationMatch::kFromInnermost
             ? merge_from_innermost(native, runtime, runs_loop, innermost_loop_empty)
             : merge_from_outermost(native, runtime, runs_loop);
}

}  // namespace bpfprof
