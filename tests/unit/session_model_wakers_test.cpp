// Woken waits and the wakers' shares of the waiting time.
#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

#include "tests/unit/session_model_test_events.h"
#include "userspace/model/session_model.h"

namespace bpfprof {
namespace {

using namespace model_test;

// A thread (tid 2) of process 1 woken by thread 3 of the same process.
class Wakers : public ::testing::Test {
 protected:
  void SetUp() override {
    model.configure(1000000, /*off_cpu=*/true);
    model.apply(ms(0), ForkEvent{Pid{1}, Tid{1}, Pid{1}, Tid{2}, "consumer"});
    model.apply(ms(0), ForkEvent{Pid{1}, Tid{1}, Pid{1}, Tid{3}, "producer"});
    producer = recording.wakers.intern(Waker{WakerContext::kThread, Pid{1}, Tid{3}, "producer"});
    timer = recording.wakers.intern(Waker{WakerContext::kInterrupt, Pid{0}, Tid{0}, ""});
    cause = recording.raw_stacks.intern_path(std::vector<uint64_t>{0x1000, 0xffffffff81000010ull});
    model.consume(recording, MonotonicNs{0});  // takes the wakers; no events
  }
  void at(uint64_t time_us, SampleKind kind, OffCpuState state = OffCpuState::kNone,
          WakerId waker = WakerId{}) {
    SampleRecord s{MonotonicNs{time_us * 1000},
                   Pid{1},
                   Tid{2},
                   Cpu{0},
                   CpuTimeNs{0},
                   kind == SampleKind::kWaking ? cause : RawStackTree::kRoot,
                   kind,
                   state};
    s.waker = waker;
    model.add_sample(s, recording.raw_stacks);
  }
  const Thread& consumer() {
    for (const Thread& t : model.threads())
      if (t.tid == Tid{2}) return t;
    throw std::logic_error("no consumer");
  }
  SessionModel model;
  Recording recording;
  WakerId producer, timer;
  RawStackId cause = RawStackTree::kRoot;
};

TEST_F(Wakers, AWaitEndedByAWakingGetsItsWakerAndCauseFromSwitchOutToWaking) {
  at(1000, SampleKind::kSwitchOut, OffCpuState::kSleeping);
  at(4000, SampleKind::kWaking, OffCpuState::kNone, producer);
  at(4100, SampleKind::kSwitchIn);
  const Thread& t = consumer();
  ASSERT_EQ(t.woken_waits.size(), 1u);
  const WokenWait& w = t.woken_waits[0];
  EXPECT_EQ(w.start, MonotonicNs{1000000});
  EXPECT_EQ(w.woken, MonotonicNs{4000000});
  EXPECT_EQ(w.state, OffCpuState::kSleeping);
  EXPECT_EQ(model.wakers()[w.waker].comm, "producer");
  ASSERT_TRUE(w.waker_process.has_value());
  ASSERT_TRUE(w.cause.has_value());
  EXPECT_EQ(model.stacks().node(*w.cause).key, FrameKey::kernel(0xffffffff81000010ull));
  const WakerShare& share = model.processes()[t.process.value].wakers.at(w.waker);
  EXPECT_EQ(share.waited_ns, 3000000u);
  EXPECT_EQ(share.wakings, 1u);
}

TEST_F(Wakers, ShortWaitsHaveNoMarkerButCountForTheirWaker) {
  for (uint64_t i = 0; i < 4; ++i) {
    at(1000 + i * 1000, SampleKind::kSwitchOut, OffCpuState::kSleeping);
    at(1500 + i * 1000, SampleKind::kWaking, OffCpuState::kNone, timer);
    at(1600 + i * 1000, SampleKind::kSwitchIn);
  }
  EXPECT_TRUE(consumer().woken_waits.empty());
  // An interrupt's share goes by its stack (what it was), not by the one interrupt waker.
  const Process& p = model.processes()[consumer().process.value];
  EXPECT_TRUE(p.wakers.empty());
  ASSERT_EQ(p.interrupt_wakers.size(), 1u);
  const auto& [stack, share] = *p.interrupt_wakers.begin();
  EXPECT_EQ(model.stacks().node(stack).key, FrameKey::kernel(0xffffffff81000010ull));
  EXPECT_EQ(share.waited_ns, 2000000u);
  EXPECT_EQ(share.wakings, 4u);
}

TEST_F(Wakers, TheThresholdIsConfigurable) {
  model.set_wake_threshold(400000);
  at(1000, SampleKind::kSwitchOut, OffCpuState::kIoWait);
  at(1500, SampleKind::kWaking, OffCpuState::kNone, timer);
  at(1600, SampleKind::kSwitchIn);
  ASSERT_EQ(consumer().woken_waits.size(), 1u);
  EXPECT_EQ(consumer().woken_waits[0].state, OffCpuState::kIoWait);
}

// --flight-recorder: the totals are those of the waits woken in the window; the seconds
// before it leave them (timer waits in second 1, producer waits in seconds 2 and 3).
TEST_F(Wakers, AWindowsTotalsForgetTheSecondsBeforeIt) {
  model.keep_wakers_by_second();
  const uint64_t s = 1000000;  // a second, in microseconds
  at(1 * s + 1000, SampleKind::kSwitchOut, OffCpuState::kSleeping);
  at(1 * s + 1500, SampleKind::kWaking, OffCpuState::kNone, timer);
  at(1 * s + 1600, SampleKind::kSwitchIn);
  for (uint64_t second : {2, 3}) {
    at(second * s + 1000, SampleKind::kSwitchOut, OffCpuState::kSleeping);
    at(second * s + 4000, SampleKind::kWaking, OffCpuState::kNone, producer);
    at(second * s + 4100, SampleKind::kSwitchIn);
  }
  const Process& p = model.processes()[consumer().process.value];
  ASSERT_EQ(p.interrupt_wakers.size(), 1u);
  ASSERT_EQ(p.wakers.at(producer).wakings, 2u);
  model.drop_samples_before(MonotonicNs{2500000000});  // second 1 is out, second 2 is not
  EXPECT_TRUE(p.interrupt_wakers.empty());
  EXPECT_EQ(p.wakers.at(producer).wakings, 2u);
  model.drop_samples_before(MonotonicNs{3000000000});
  EXPECT_EQ(p.wakers.at(producer).wakings, 1u);
  EXPECT_EQ(p.wakers.at(producer).waited_ns, 3000000u);
  model.drop_samples_before(MonotonicNs{4000000000});
  EXPECT_TRUE(p.wakers.empty());
}

// The waker may run try_to_wake_up while the sleeper is still on its way off the CPU.
TEST_F(Wakers, AWakingJustBeforeTheSwitchOutEndsThatWait) {
  at(1000, SampleKind::kWaking, OffCpuState::kNone, producer);
  at(1020, SampleKind::kSwitchOut, OffCpuState::kSleeping);
  at(2500, SampleKind::kSwitchIn);
  ASSERT_EQ(model.processes()[consumer().process.value].wakers.count(producer), 1u);
}

TEST_F(Wakers, AWakingWhileRunningOrAPreemptionEndsNoWait) {
  at(1000, SampleKind::kWaking, OffCpuState::kNone, producer);  // it was still running
  at(3000, SampleKind::kSwitchOut, OffCpuState::kSleeping);
  at(6000, SampleKind::kSwitchIn);  // no waking: not a wait anyone ended
  at(7000, SampleKind::kWaking, OffCpuState::kNone, producer);
  at(7010, SampleKind::kSwitchOut, OffCpuState::kWaitingForCpu);  // preempted: runnable
  at(9000, SampleKind::kSwitchIn);
  EXPECT_TRUE(consumer().woken_waits.empty());
  EXPECT_TRUE(model.processes()[consumer().process.value].wakers.empty());
}

}  // namespace
}  // namespace bpfprof
