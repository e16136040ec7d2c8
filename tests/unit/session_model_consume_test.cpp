// The model fed as a recording goes (consume), with its stacks compacted midway.
#include <gtest/gtest.h>

#include <vector>

#include "tests/unit/session_model_test_events.h"
#include "userspace/model/session_model.h"

namespace bpfprof {
namespace {

using namespace model_test;

TEST(SessionModel, ConsumingAsTheRecordingGoesEqualsReplayingAtTheEnd) {
  auto make = [] {
    Recording rec;
    rec.frequency_hz = 1000;
    rec.events.push_back(LifecycleEvent{ms(0), ForkEvent{Pid{1}, Tid{1}, Pid{1}, Tid{2}, "t"}});
    for (uint64_t i = 1; i <= 40; ++i) {
      // Out of order by one position, as two CPUs' events interleave.
      const uint64_t at = (i % 2) ? i + 1 : i - 1;
      rec.samples.push_back(SampleRecord{
          ms(at), Pid{1}, Tid{2}, Cpu{0}, CpuTimeNs{at * 1000000},
          rec.raw_stacks.intern(RawStackTree::kRoot, 0xffffffff81000000ull + (at / 3))});
    }
    rec.events.push_back(
        LifecycleEvent{ms(45), ExitEvent{Pid{1}, Tid{2}, CpuTimeNs{45000000}, 0, false, "t"}});
    rec.end_time = ms(50);
    return rec;
  };
  Recording whole = make();
  SessionModel at_end;
  at_end.replay(whole);

  Recording streamed = make();
  SessionModel as_it_goes;
  as_it_goes.configure_for(streamed);
  as_it_goes.consume(streamed, ms(10));
  EXPECT_LT(streamed.samples.size(), 40u);  // what was consumed is gone from the recording
  as_it_goes.consume(streamed, ms(30));
  as_it_goes.consume(streamed, MonotonicNs{UINT64_MAX});
  as_it_goes.finish(streamed.end_time);
  EXPECT_TRUE(streamed.samples.empty());
  EXPECT_TRUE(streamed.events.empty());

  const Thread& a = thread_with_tid(at_end, 2);
  const Thread& b = thread_with_tid(as_it_goes, 2);
  ASSERT_EQ(a.samples.size(), b.samples.size());
  for (size_t i = 0; i < a.samples.size(); ++i) {
    EXPECT_EQ(a.samples[i].time, b.samples[i].time) << i;
    EXPECT_EQ(a.samples[i].weight, b.samples[i].weight) << i;
    EXPECT_EQ(a.samples[i].cpu_delta_ns, b.samples[i].cpu_delta_ns) << i;
  }
  EXPECT_EQ(b.end, ms(45));
}

// Compacting the raw stacks in the middle of a recording keeps only the pending samples'
// raw stacks and changes nothing in the model: the same stacks as without compaction.
TEST(SessionModel, CompactingRawStacksMidwayKeepsTheModelsStacks) {
  auto make = [] {
    Recording rec;
    rec.frequency_hz = 1000;
    rec.events.push_back(LifecycleEvent{ms(0), ForkEvent{Pid{1}, Tid{1}, Pid{1}, Tid{2}, "t"}});
    for (uint64_t i = 1; i <= 40; ++i) {
      RawStackId node = RawStackTree::kRoot;
      for (uint64_t depth = 0; depth < 1 + i % 5; ++depth)
        node = rec.raw_stacks.intern(node, 0xffffffff81000000ull + i * 16 + depth);
      rec.samples.push_back(
          SampleRecord{ms(i), Pid{1}, Tid{2}, Cpu{0}, CpuTimeNs{i * 1000000}, node});
    }
    rec.end_time = ms(50);
    return rec;
  };
  Recording plain = make();
  SessionModel untouched;
  untouched.configure_for(plain);
  untouched.consume(plain, MonotonicNs{UINT64_MAX});
  untouched.finish(plain.end_time);

  Recording compacted = make();
  SessionModel model;
  model.configure_for(compacted);
  model.consume(compacted, ms(30));
  const size_t before = compacted.raw_stacks.size();
  model.compact_raw_stacks(compacted);
  size_t pending_frames = 0;
  for (const SampleRecord& s : compacted.samples)
    pending_frames += compacted.raw_stacks.leaf_to_root(s.stack).size();
  EXPECT_LT(compacted.raw_stacks.size(), before);
  EXPECT_EQ(compacted.raw_stacks.size(), pending_frames);  // no two pending stacks share a node
  model.consume(compacted, MonotonicNs{UINT64_MAX});
  model.finish(compacted.end_time);

  const Thread& a = thread_with_tid(untouched, 2);
  const Thread& b = thread_with_tid(model, 2);
  ASSERT_EQ(a.samples.size(), b.samples.size());
  for (size_t i = 0; i < a.samples.size(); ++i) {
    std::vector<FrameKey> frames_a;
    std::vector<FrameKey> frames_b;
    for (StackId n = a.samples[i].stack; n != ResolvedStackTree::kRoot;
         n = untouched.stacks().node(n).parent)
      frames_a.push_back(untouched.stacks().node(n).key);
    for (StackId n = b.samples[i].stack; n != ResolvedStackTree::kRoot;
         n = model.stacks().node(n).parent)
      frames_b.push_back(model.stacks().node(n).key);
    EXPECT_EQ(frames_a, frames_b) << i;
  }
}

// A sample or event that reaches the model after the model took its time (the recorder was
// starved past the reorder window) is counted, not silently applied out of order.
TEST(SessionModel, ArrivalsBehindWhatWasTakenAreCountedLate) {
  Recording rec;
  rec.frequency_hz = 1000;
  rec.events.push_back(LifecycleEvent{ms(0), ForkEvent{Pid{1}, Tid{1}, Pid{1}, Tid{2}, "t"}});
  auto sample_at = [&](uint64_t at) {
    return SampleRecord{ms(at),
                        Pid{1},
                        Tid{2},
                        Cpu{0},
                        CpuTimeNs{at * 1000000},
                        rec.raw_stacks.intern(RawStackTree::kRoot, 0xffffffff81000000ull)};
  };
  for (uint64_t at : {1, 2, 3}) rec.samples.push_back(sample_at(at));
  SessionModel model;
  model.configure_for(rec);
  model.consume(rec, ms(10));
  EXPECT_EQ(rec.stats.late_events, 0u);
  rec.samples.push_back(sample_at(9));   // older than what was taken: late
  rec.samples.push_back(sample_at(11));  // in time
  rec.events.push_back(LifecycleEvent{ms(5), CommEvent{Pid{1}, Tid{2}, "late"}});
  model.consume(rec, ms(20));
  EXPECT_EQ(rec.stats.late_events, 2u);
  model.consume(rec, MonotonicNs{UINT64_MAX});
  EXPECT_EQ(rec.stats.late_events, 2u);
}

}  // namespace
}  // namespace bpfprof
