// ThreadWaits: which waking ended a thread's wait.
#include "userspace/model/thread_waits.h"
#include "tests/unit/test_helpers.h"

#include <gtest/gtest.h>

namespace bpfprof {
namespace {

using testing_helpers::kNsPerMs;

ThreadWaits::Waking waking_at(uint64_t ns, uint32_t waker = 7) {
  return ThreadWaits::Waking{MonotonicNs{ns}, WakerId{waker}, std::nullopt, StackId{3}};
}

TEST(ThreadWaits, AWakingDuringTheWaitEndsIt) {
  ThreadWaits waits;
  waits.switched_out(MonotonicNs{10 * kNsPerMs}, OffCpuState::kSleeping);
  waits.woken(waking_at(14 * kNsPerMs));
  const auto ended = waits.runs_again(MonotonicNs{15 * kNsPerMs});
  ASSERT_TRUE(ended);
  EXPECT_EQ(ended->since.value, 10 * kNsPerMs);
  EXPECT_EQ(ended->woken.value, 14 * kNsPerMs);  // the wait for a CPU after it is not the waker's
  EXPECT_EQ(ended->state, OffCpuState::kSleeping);
  EXPECT_EQ(ended->waking.waker, WakerId{7});
  EXPECT_FALSE(waits.runs_again(MonotonicNs{16 * kNsPerMs}));  // closed once
}

TEST(ThreadWaits, AWakingJustBeforeTheSwitchOutEndsTheWaitFromItsStart) {
  ThreadWaits waits;
  waits.woken(waking_at(10 * kNsPerMs - 50000));  // the waker ran on another CPU meanwhile
  waits.switched_out(MonotonicNs{10 * kNsPerMs}, OffCpuState::kIoWait);
  const auto ended = waits.runs_again(MonotonicNs{11 * kNsPerMs});
  ASSERT_TRUE(ended);
  EXPECT_EQ(ended->woken.value, 10 * kNsPerMs);
}

TEST(ThreadWaits, AWakingWhileTheThreadRanEndsNoLaterWait) {
  ThreadWaits waits;
  waits.woken(waking_at(5 * kNsPerMs));
  waits.switched_out(MonotonicNs{10 * kNsPerMs}, OffCpuState::kSleeping);
  EXPECT_FALSE(waits.runs_again(MonotonicNs{12 * kNsPerMs}));
}

TEST(ThreadWaits, APreemptedThreadIsWokenByNobody) {
  ThreadWaits waits;
  waits.switched_out(MonotonicNs{10 * kNsPerMs}, OffCpuState::kWaitingForCpu);
  waits.woken(waking_at(11 * kNsPerMs));
  EXPECT_FALSE(waits.runs_again(MonotonicNs{12 * kNsPerMs}));
}

TEST(ThreadWaits, AWakingAfterTheThreadRanAgainIsNotItsEnd) {
  ThreadWaits waits;
  waits.switched_out(MonotonicNs{10 * kNsPerMs}, OffCpuState::kSleeping);
  waits.woken(waking_at(13 * kNsPerMs));
  EXPECT_FALSE(waits.runs_again(MonotonicNs{12 * kNsPerMs}));
}

TEST(ThreadWaits, CompactionMovesTheKeptStacksAndProcesses) {
  ThreadWaits waits;
  waits.set_last_stack(StackId{5});
  ThreadWaits::Waking w = waking_at(11 * kNsPerMs);
  w.waker_process = ProcessIndex{4};
  waits.switched_out(MonotonicNs{10 * kNsPerMs}, OffCpuState::kSleeping);
  waits.woken(w);
  waits.move_stacks([](StackId id) { return id + 100; });
  waits.move_processes([](std::optional<ProcessIndex>& p) { p = ProcessIndex{p->value - 1}; });
  EXPECT_EQ(waits.last_stack(), StackId{105});
  const auto ended = waits.runs_again(MonotonicNs{12 * kNsPerMs});
  ASSERT_TRUE(ended);
  EXPECT_EQ(ended->waking.cause, StackId{103});
  EXPECT_EQ(ended->waking.waker_process, ProcessIndex{3});
}

}  // namespace
}  // namespace bpfprof
