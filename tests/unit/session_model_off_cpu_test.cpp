// Off-CPU waits and collapsed runs of timer samples, as the model turns switches into samples.
#include <gtest/gtest.h>

#include "tests/unit/session_model_test_events.h"
#include "userspace/model/session_model.h"

namespace bpfprof {
namespace {

using namespace model_test;

SampleRecord switch_out(uint64_t at_ms, int tid, uint64_t runtime_ns, OffCpuState state) {
  return SampleRecord{ms(at_ms),
                      Pid{1},
                      Tid{tid},
                      Cpu{0},
                      CpuTimeNs{runtime_ns},
                      RawStackTree::kRoot,
                      SampleKind::kSwitchOut,
                      state};
}
SampleRecord switch_in(uint64_t at_ms, int tid) {
  return SampleRecord{ms(at_ms),
                      Pid{1},
                      Tid{tid},
                      Cpu{0},
                      CpuTimeNs{0},
                      RawStackTree::kRoot,
                      SampleKind::kSwitchIn};
}
SampleRecord on_cpu(uint64_t at_ms, int tid, uint64_t runtime_ns) {
  return SampleRecord{ms(at_ms),          Pid{1}, Tid{tid}, Cpu{0}, CpuTimeNs{runtime_ns},
                      RawStackTree::kRoot};
}

OffCpuState leaf_state(const SessionModel& model, StackId stack) {
  const FrameKey& leaf = model.stacks().node(stack).key;
  EXPECT_EQ(leaf.kind, FrameKind::kOffCpuState);
  return leaf.off_cpu_state();
}

TEST(OffCpu, ABlockedIntervalIsOneSampleWeightedByItsLength) {
  SessionModel model;
  model.configure(1000000, /*off_cpu=*/true);
  RawStackTree raw;
  model.apply(ms(0), ForkEvent{Pid{1}, Tid{1}, Pid{1}, Tid{2}, "t"});
  model.add_sample(on_cpu(1, 2, 1000000), raw);
  model.add_sample(switch_out(2, 2, 2000000, OffCpuState::kIoWait), raw);
  model.add_sample(switch_in(52, 2), raw);  // 50 ms in D state
  model.add_sample(on_cpu(53, 2, 2500000), raw);
  model.finish(ms(100));
  const Thread& t = thread_with_tid(model, 2);
  ASSERT_EQ(t.samples.size(), 3u);
  EXPECT_EQ(t.samples[1].time, ms(2));
  EXPECT_DOUBLE_EQ(t.samples[1].weight, 50.0);
  EXPECT_EQ(leaf_state(model, t.samples[1].stack), OffCpuState::kIoWait);
  EXPECT_EQ(t.samples[1].cpu_delta_ns, 1000000u);  // what it ran since the previous sample
  EXPECT_DOUBLE_EQ(t.samples[2].weight, 1.0);
  EXPECT_EQ(t.samples[2].cpu_delta_ns, 500000u);  // 0.5 ms over 51 ms: ~0% while blocked
}

TEST(OffCpu, ShortWaitsAreSummedNotDropped) {
  SessionModel model;
  model.configure(1000000, true);
  RawStackTree raw;
  model.apply(ms(0), ForkEvent{Pid{1}, Tid{1}, Pid{1}, Tid{2}, "t"});
  // 8 waits of 0.25 ms each: 2 ms in all, in two samples of weight 1.
  for (uint64_t i = 0; i < 8; ++i) {
    uint64_t at_us = 1000 + i * 1000;
    model.add_sample(
        SampleRecord{MonotonicNs{at_us * 1000}, Pid{1}, Tid{2}, Cpu{0}, CpuTimeNs{i * 750000},
                     RawStackTree::kRoot, SampleKind::kSwitchOut, OffCpuState::kSleeping},
        raw);
    model.add_sample(SampleRecord{MonotonicNs{(at_us + 250) * 1000}, Pid{1}, Tid{2}, Cpu{0},
                                  CpuTimeNs{0}, RawStackTree::kRoot, SampleKind::kSwitchIn},
                     raw);
  }
  model.finish(ms(100));
  const Thread& t = thread_with_tid(model, 2);
  double weight = 0;
  for (const ThreadSample& s : t.samples) weight += s.weight;
  EXPECT_DOUBLE_EQ(weight, 2.0);
  EXPECT_EQ(t.samples.size(), 2u);
  for (size_t i = 1; i < t.samples.size(); ++i) EXPECT_GE(t.samples[i].time, t.samples[i - 1].time);
}

TEST(OffCpu, AThreadStillBlockedAtTheEndIsClosedThere) {
  SessionModel model;
  model.configure(1000000, true);
  RawStackTree raw;
  model.apply(ms(0), ForkEvent{Pid{1}, Tid{1}, Pid{1}, Tid{2}, "t"});
  model.add_sample(switch_out(10, 2, 10000000, OffCpuState::kSleeping), raw);
  model.finish(ms(110));
  const Thread& t = thread_with_tid(model, 2);
  ASSERT_EQ(t.samples.size(), 1u);
  EXPECT_DOUBLE_EQ(t.samples[0].weight, 100.0);
}

TEST(OffCpu, WithoutOffCpuASwitchOutIsAZeroWeightMarker) {
  SessionModel model;
  model.configure(1000000, /*off_cpu=*/false);
  RawStackTree raw;
  model.apply(ms(0), ForkEvent{Pid{1}, Tid{1}, Pid{1}, Tid{2}, "t"});
  model.add_sample(on_cpu(1, 2, 1000000), raw);
  model.add_sample(switch_out(2, 2, 2000000, OffCpuState::kWaitingForCpu), raw);
  model.finish(ms(100));
  const Thread& t = thread_with_tid(model, 2);
  ASSERT_EQ(t.samples.size(), 2u);
  EXPECT_DOUBLE_EQ(t.samples[1].weight, 0.0);
  EXPECT_EQ(leaf_state(model, t.samples[1].stack), OffCpuState::kWaitingForCpu);
  EXPECT_EQ(model.stacks().node(t.samples[1].stack).parent,
            ResolvedStackTree::kRoot);  // the state alone
}

TEST(OffCpu, ShortWaitsLeftAtTheEndAreShownWhenTheyHappened) {
  SessionModel model;
  model.configure(1000000, true);
  RawStackTree raw;
  model.apply(ms(0), ForkEvent{Pid{1}, Tid{1}, Pid{1}, Tid{2}, "t"});
  model.add_sample(switch_out(1, 2, 1000000, OffCpuState::kSleeping), raw);
  model.add_sample(switch_in(201, 2), raw);  // a long wait: one sample at 1 ms
  // A short wait at 210 ms, then the thread ends without another sample.
  model.add_sample(switch_out(210, 2, 1500000, OffCpuState::kWaitingForCpu), raw);
  model.add_sample(SampleRecord{MonotonicNs{210500000}, Pid{1}, Tid{2}, Cpu{0}, CpuTimeNs{0},
                                RawStackTree::kRoot, SampleKind::kSwitchIn},
                   raw);
  model.finish(ms(300));
  const Thread& t = thread_with_tid(model, 2);
  ASSERT_EQ(t.samples.size(), 2u);
  EXPECT_EQ(t.samples[0].time, ms(1));
  EXPECT_EQ(t.samples[1].time, ms(210));
  EXPECT_DOUBLE_EQ(t.samples[1].weight, 0.5);
}

// The kernel's exit path goes on after the exit event and can be preempted there: the wait
// for a CPU is the thread's, and the thread ends after it (its track ends where it does).
TEST(OffCpu, AThreadPreemptedAfterItsExitEventEndsAfterTheWait) {
  SessionModel model;
  model.configure(1000000, /*off_cpu=*/true);
  RawStackTree raw;
  model.apply(ms(0), ForkEvent{Pid{1}, Tid{1}, Pid{1}, Tid{2}, "t"});
  model.add_sample(on_cpu(1, 2, 1000000), raw);
  model.apply(ms(5), ExitEvent{Pid{1}, Tid{2}, CpuTimeNs{5000000}, 0, false, "t"});
  model.add_sample(switch_out(6, 2, 5100000, OffCpuState::kWaitingForCpu), raw);
  model.add_sample(switch_in(20, 2), raw);  // 14 ms runnable, then the rest of its exit
  model.finish(ms(100));
  const Thread& t = thread_with_tid(model, 2);
  ASSERT_FALSE(t.samples.empty());
  const ThreadSample& wait = t.samples.back();
  EXPECT_EQ(wait.time, ms(6));
  EXPECT_DOUBLE_EQ(wait.weight, 14.0);
  ASSERT_TRUE(t.end);
  EXPECT_EQ(*t.end, ms(20));
}

TEST(CollapsedSamples, ConsecutiveIdenticalTicksBecomeOneWeightedSample) {
  SessionModel model;
  RawStackTree raw;
  model.apply(ms(0), ForkEvent{Pid{1}, Tid{1}, Pid{1}, Tid{2}, "t"});
  const RawStackId a = raw.intern(RawStackTree::kRoot, 0xffffffff81000000ull);
  const RawStackId b = raw.intern(RawStackTree::kRoot, 0xffffffff81000100ull);
  // a a a b a, then a after a 10 ms gap (not consecutive in time).
  const RawStackId order[] = {a, a, a, b, a};
  for (uint64_t i = 0; i < 5; ++i)
    model.add_sample(
        SampleRecord{ms(i + 1), Pid{1}, Tid{2}, Cpu{0}, CpuTimeNs{(i + 1) * 1000000}, order[i]},
        raw);
  model.add_sample(SampleRecord{ms(15), Pid{1}, Tid{2}, Cpu{0}, CpuTimeNs{6000000}, a}, raw);
  model.finish(ms(20));
  const Thread& t = thread_with_tid(model, 2);
  // The thread's first sample stays alone (the profiler ignores its CPU delta).
  ASSERT_EQ(t.samples.size(), 5u);
  EXPECT_EQ(t.samples[0].time, ms(1));
  EXPECT_EQ(t.samples[0].weight, 1.0);
  EXPECT_EQ(t.samples[1].time, ms(2));
  EXPECT_EQ(t.samples[1].weight, 2.0);
  EXPECT_EQ(t.samples[1].cpu_delta_ns, 2000000u);  // the two ticks' CPU time
  EXPECT_EQ(t.samples[2].weight, 1.0);
  EXPECT_NE(t.samples[2].stack, t.samples[1].stack);
  EXPECT_EQ(t.samples[3].weight, 1.0);
  EXPECT_EQ(t.samples[4].time, ms(15));
  uint64_t cpu = 0;
  double weight = 0;
  for (const ThreadSample& s : t.samples) cpu += s.cpu_delta_ns, weight += s.weight;
  EXPECT_EQ(weight, 6.0);  // every tick still counts
  EXPECT_EQ(cpu, 6000000u);
}

TEST(CollapsedSamples, AWaitInBetweenKeepsSamplesApart) {
  SessionModel model;
  model.configure(1000000, /*off_cpu=*/true);
  RawStackTree raw;
  model.apply(ms(0), ForkEvent{Pid{1}, Tid{1}, Pid{1}, Tid{2}, "t"});
  const RawStackId a = raw.intern(RawStackTree::kRoot, 0xffffffff81000000ull);
  model.add_sample(SampleRecord{ms(1), Pid{1}, Tid{2}, Cpu{0}, CpuTimeNs{1000000}, a}, raw);
  SampleRecord out{ms(1),
                   Pid{1},
                   Tid{2},
                   Cpu{0},
                   CpuTimeNs{1100000},
                   a,
                   SampleKind::kSwitchOut,
                   OffCpuState::kSleeping};
  out.time = MonotonicNs{1100000};
  model.add_sample(out, raw);
  model.add_sample(SampleRecord{MonotonicNs{2500000}, Pid{1}, Tid{2}, Cpu{0}, CpuTimeNs{0},
                                RawStackTree::kRoot, SampleKind::kSwitchIn},
                   raw);
  model.add_sample(
      SampleRecord{MonotonicNs{2600000}, Pid{1}, Tid{2}, Cpu{0}, CpuTimeNs{1200000}, a}, raw);
  model.finish(ms(3));
  const Thread& t = thread_with_tid(model, 2);
  ASSERT_EQ(t.samples.size(), 3u);  // tick, 1.4 ms wait, tick
  EXPECT_EQ(t.samples[0].weight, 1.0);
  EXPECT_NEAR(t.samples[1].weight, 1.4, 1e-9);
  EXPECT_EQ(t.samples[2].weight, 1.0);
}

}  // namespace
}  // namespace bpfprof
