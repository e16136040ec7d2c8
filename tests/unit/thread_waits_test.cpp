// ThreadWaits: which waking ended a thread's wait.
#include "userspace/model/thread_waits.h"

#include <gtest/gtest.h>

namespace bpfprof {
namespace {

constexpr uint64_t kMs = 1000000;

ThreadWaits::Waking waking_at(uint64_t ns, uint32_t waker = 7) {
  return ThreadWaits::Waking{MonotonicNs{ns}, WakerId{waker}, std::nullopt, StackId{3}};
}

TEST(ThreadWaits, AWakingDuringTheWaitEndsIt) {
  ThreadWaits waits;
  waits.switched_out(MonotonicNs{10 * kMs}, OffCpuState::kSleeping);
  waits.woken(waking_at(14 * kMs));
  const auto ended = waits.runs_again(MonotonicNs{15 * kMs});
  ASSERT_TRUE(ended);
  EXPECT_EQ(ended->since.value, 10 * kMs);
  EXPECT_EQ(ended->woken.value, 14 * kMs);  // the wait for a CPU after it is not the waker's
  EXPECT_EQ(ended->state, OffCpuState::kSleeping);
  EXPECT_EQ(ended->waking.waker, WakerId{7});
  EXPECT_FALSE(waits.runs_again(MonotonicNs{16 * kMs}));  // closed once
}

TEST(ThreadWaits, AWakingJustBeforeTheSwitchOutEndsTheWaitFromItsStart) {
  ThreadWaits waits;
  waits.woken(waking_at(10 * kMs - 50000));  // the waker ran on another CPU meanwhile
  waits.switched_out(MonotonicNs{10 * kMs}, OffCpuState::kIoWait);
  const auto ended = waits.runs_again(MonotonicNs{11 * kMs});
  ASSERT_TRUE(ended);
  EXPECT_EQ(ended->woken.value, 10 * kMs);
}

TEST(ThreadWaits, AWakingWhileTheThreadRanEndsNoLaterWait) {
  ThreadWaits waits;
  waits.woken(waking_at(5 * kMs));
  waits.switched_out(MonotonicNs{10 * kMs}, OffCpuState::kSleeping);
  EXPECT_FALSE(waits.runs_again(MonotonicNs{12 * kMs}));
}

TEST(ThreadWaits, APreemptedThreadIsWokenByNobody) {
  ThreadWaits waits;
  waits.switched_out(MonotonicNs{10 * kMs}, OffCpuState::kWaitingForCpu);
  waits.woken(waking_at(11 * kMs));
  EXPECT_FALSE(waits.runs_again(MonotonicNs{12 * kMs}));
}

TEST(ThreadWaits, AWakingAfterTheThreadRanAgainIsNotItsEnd) {
  ThreadWaits waits;
  waits.switched_out(MonotonicNs{10 * kMs}, OffCpuState::kSleeping);
  waits.woken(waking_at(13 * kMs));
  EXPECT_FALSE(waits.runs_again(MonotonicNs{12 * kMs}));
}

TEST(ThreadWaits, CompactionMovesTheKeptStacksAndProcesses) {
  ThreadWaits waits;
  waits.set_last_stack(StackId{5});
  ThreadWaits::Waking w = waking_at(11 * kMs);
  w.waker_process = ProcessIndex{4};
  waits.switched_out(MonotonicNs{10 * kMs}, OffCpuState::kSleeping);
  waits.woken(w);
  waits.move_stacks([](StackId id) { return id + 100; });
  waits.move_processes([](std::optional<ProcessIndex>& p) { p = ProcessIndex{p->value - 1}; });
  EXPECT_EQ(waits.last_stack(), StackId{105});
  const auto ended = waits.runs_again(MonotonicNs{12 * kMs});
  ASSERT_TRUE(ended);
  EXPECT_EQ(ended->waking.cause, StackId{103});
  EXPECT_EQ(ended->waking.waker_process, ProcessIndex{3});
}

}  // namespace
}  // namespace bpfprof
