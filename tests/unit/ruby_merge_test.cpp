// Ruby frames merged in place of the native rb_vm_exec frames (runtimes/ruby/runtime.h),
// matched from the outermost call.
#include <gtest/gtest.h>

#include <vector>

#include "runtimes/kit/merge.h"

namespace bpfprof {
namespace {

constexpr uint64_t kLoop = 0x1000;  // the VM loop's native frames
bool runs_vm_loop(uint64_t pc) { return pc == kLoop; }

// Calls, innermost first: {main, work} is the outer call, {block, ripen} the inner one.
const std::vector<ActivationFrame> kTwoCalls = {
    {0xb10c, false}, {0x21be, true}, {0x3a11, false}, {0x3a1a, true}};

TEST(RubyMerge, EachCallInPlaceOfItsLoopFrame) {
  const std::vector<uint64_t> native = {0x10, kLoop, 0x20, kLoop, 0x30};
  const MergedStack merged =
      merge_runtime_frames(native, kTwoCalls, runs_vm_loop, ActivationMatch::kFromOutermost);
  EXPECT_EQ(merged.frames,
            (std::vector<uint64_t>{0x10, 0xb10c, 0x21be, 0x20, 0x3a11, 0x3a1a, 0x30}));
  EXPECT_EQ(merged.runtime_frames, 4u);
  EXPECT_FALSE(merged.mismatched);
}

// Sampled as a call ends: its frame is popped, rb_vm_exec has not returned yet. The outer
// calls keep their places; the VM loop frame at the leaf stays native.
TEST(RubyMerge, ALoopFrameWithoutItsCallAtTheLeafStaysNative) {
  const std::vector<uint64_t> native = {kLoop, 0x10, kLoop, 0x20, kLoop, 0x30};
  const MergedStack merged =
      merge_runtime_frames(native, kTwoCalls, runs_vm_loop, ActivationMatch::kFromOutermost);
  EXPECT_EQ(merged.frames,
            (std::vector<uint64_t>{kLoop, 0x10, 0xb10c, 0x21be, 0x20, 0x3a11, 0x3a1a, 0x30}));
  EXPECT_TRUE(merged.mismatched);
}

// Sampled as a call begins: its frame is pushed, rb_vm_exec not entered yet: the call at the
// leaf is dropped.
TEST(RubyMerge, ACallWithoutItsLoopFrameAtTheLeafIsDropped) {
  const std::vector<uint64_t> native = {0x10, kLoop, 0x30};
  const MergedStack merged =
      merge_runtime_frames(native, kTwoCalls, runs_vm_loop, ActivationMatch::kFromOutermost);
  EXPECT_EQ(merged.frames, (std::vector<uint64_t>{0x10, 0x3a11, 0x3a1a, 0x30}));
  EXPECT_TRUE(merged.mismatched);
}

TEST(RubyMerge, NoRubyFramesLeavesTheStack) {
  const std::vector<uint64_t> native = {0x10, kLoop, 0x30};
  const MergedStack merged =
      merge_runtime_frames(native, {}, runs_vm_loop, ActivationMatch::kFromOutermost);
  EXPECT_EQ(merged.frames, native);
  EXPECT_EQ(merged.runtime_frames, 0u);
}

}  // namespace
}  // namespace bpfprof
