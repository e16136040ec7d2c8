// Merges a runtime's frames into a native user stack: the BPF side sends a thread's runtime
// frames just before its sample, and each native frame of the runtime's interpreter loop (or
// VM loop) is replaced by the runtime frames its activation was running, innermost first.
// The runtimes differ only in how activations meet loop frames (ActivationMatch).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

namespace bpfprof {

// A runtime frame as it goes into a raw stack: its raw address (raw_runtime_frame) and whether
// it is the first frame of its activation of the interpreter loop.
struct ActivationFrame {
  uint64_t raw = 0;
  bool entry = false;
};

struct MergedStack {
  std::vector<uint64_t> frames;
  size_t runtime_frames = 0;  // placed
  bool mismatched = false;    // activations left over (dropped) or loop frames left native
};

// How the activations (runtime frames up to each `entry` frame) meet the loop frames.
enum class ActivationMatch {
  // Each loop frame, from the leaf, takes the next activation, from the innermost (CPython:
  // every loop frame runs one, and the walk has every frame from the innermost on).
  kFromInnermost,
  // The i-th loop frame from the leaf takes the activation as far from the outermost as it
  // is (CRuby): a sample taken while a call is entered or left (its frame pushed before the
  // loop runs, or popped before it returns) differs from the native stack at the leaf only,
  // so the outer calls keep their places; what is left over at the leaf is dropped or stays
  // native.
  kFromOutermost,
};

// `native`: a user stack, innermost first; `runtime`: the runtime frames, innermost first.
// `runs_loop`: whether a native frame is one of the runtime's loop. `innermost_loop_empty`
// (kFromInnermost): the innermost loop frame runs no runtime frame (CPython 3.12+'s shim frame
// is innermost, as in the instructions that begin or end an activation): it stays native,
// without a mismatch.
MergedStack merge_runtime_frames(std::span<const uint64_t> native,
                                 std::span<const ActivationFrame> runtime,
                                 const std::function<bool(uint64_t)>& runs_loop,
                                 ActivationMatch match, bool innermost_loop_empty = false);

}  // namespace bpfprof
