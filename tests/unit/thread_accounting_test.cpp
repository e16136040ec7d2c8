// The CPU and off-CPU accounting of one thread, driven directly.
#include "userspace/model/thread_accounting.h"
#include "tests/unit/test_helpers.h"

#include <gtest/gtest.h>

namespace bpfprof {
namespace {

using testing_helpers::kNsPerMs;

MonotonicNs at_ms(double ms) { return MonotonicNs{static_cast<uint64_t>(ms * kNsPerMs)}; }
CpuTimeNs cpu_ms(double ms) { return CpuTimeNs{static_cast<uint64_t>(ms * kNsPerMs)}; }

const AccountingRules kOffCpuRules{.interval_ns = kNsPerMs, .off_cpu = true};

TEST(ThreadAccounting, RepeatedStacksCollapseAndCpuNeverExceedsWallTime) {
  ThreadAccounting accounting(at_ms(0), cpu_ms(0));
  std::vector<ThreadSample> samples;
  accounting.on_cpu_sample(kOffCpuRules, at_ms(0.5), cpu_ms(0), 6, samples);
  // The kernel updated the runtime late: 3 ms arrive at the third sample.
  accounting.on_cpu_sample(kOffCpuRules, at_ms(1), cpu_ms(0), 7, samples);
  accounting.on_cpu_sample(kOffCpuRules, at_ms(2), cpu_ms(3), 7, samples);
  accounting.on_cpu_sample(kOffCpuRules, at_ms(3), cpu_ms(3), 8, samples);
  ASSERT_EQ(samples.size(), 3u);
  EXPECT_EQ(samples[1].weight, 2.0);  // two ticks of stack 7
  // Never more than the wall time since the tick before: 1 ms at 2 ms, 1 ms at 3 ms.
  EXPECT_EQ(samples[1].cpu_delta_ns, 1 * kNsPerMs);
  EXPECT_EQ(samples[2].cpu_delta_ns, 1 * kNsPerMs);
  accounting.finish(kOffCpuRules, at_ms(3), samples);  // the rest goes to the last sample
  EXPECT_EQ(samples[2].cpu_delta_ns, 2 * kNsPerMs);
}

// The profiler ignores a thread's first threadCPUDelta: a thread spinning on one stack from
// its first sample must not put all its CPU time there.
TEST(ThreadAccounting, NothingCollapsesIntoAThreadsFirstSample) {
  ThreadAccounting accounting(at_ms(0), cpu_ms(0));
  std::vector<ThreadSample> samples;
  for (int ms = 1; ms <= 4; ++ms)
    accounting.on_cpu_sample(kOffCpuRules, at_ms(ms), cpu_ms(ms), 7, samples);
  ASSERT_EQ(samples.size(), 2u);
  EXPECT_EQ(samples[0].weight, 1.0);
  EXPECT_EQ(samples[0].cpu_delta_ns, 1 * kNsPerMs);
  EXPECT_EQ(samples[1].weight, 3.0);
  EXPECT_EQ(samples[1].cpu_delta_ns, 3 * kNsPerMs);
}

// A window (--flight-recorder) that starts inside a collapsed run keeps the run's ticks from
// its start on, with their share of the CPU time; a wait keeps the time after the start.
TEST(ThreadAccounting, APartOfARunOrWaitFromATime) {
  const ThreadSample run{at_ms(10), 7, 10 * kNsPerMs, 10.0};  // ticks at 10, 11, ..., 19 ms
  const std::optional<ThreadSample> ticks = sample_part_from(run, at_ms(13.5), kNsPerMs);
  ASSERT_TRUE(ticks);
  EXPECT_EQ(ticks->time, at_ms(14));
  EXPECT_EQ(ticks->weight, 6.0);
  EXPECT_EQ(ticks->cpu_delta_ns, 6 * kNsPerMs);
  EXPECT_EQ(sample_part_from(run, at_ms(19), kNsPerMs)->weight, 1.0);
  EXPECT_FALSE(sample_part_from(run, at_ms(19.5), kNsPerMs));
  EXPECT_EQ(sample_part_from(run, at_ms(5), kNsPerMs)->time, at_ms(10));  // wholly after: as is
  const ThreadSample wait{at_ms(10), 8, 0, 2.5};
  const std::optional<ThreadSample> rest = sample_part_from(wait, at_ms(11), kNsPerMs);
  ASSERT_TRUE(rest);
  EXPECT_EQ(rest->time, at_ms(11));
  EXPECT_DOUBLE_EQ(rest->weight, 1.5);
  EXPECT_FALSE(sample_part_from(wait, at_ms(12.5), kNsPerMs));
}

TEST(ThreadAccounting, ALongWaitIsOneSampleWeightedByItsLength) {
  ThreadAccounting accounting(at_ms(0), cpu_ms(0));
  std::vector<ThreadSample> samples;
  accounting.switched_out(kOffCpuRules, at_ms(1), cpu_ms(1), 42, samples);
  EXPECT_EQ(accounting.state(), ThreadAccounting::State::kOffCpu);
  EXPECT_TRUE(samples.empty());  // written when it ends
  accounting.switched_in(kOffCpuRules, at_ms(3.5), samples);
  EXPECT_EQ(accounting.state(), ThreadAccounting::State::kOnCpu);
  ASSERT_EQ(samples.size(), 1u);
  EXPECT_EQ(samples[0].time, at_ms(1));
  EXPECT_EQ(samples[0].stack, 42u);
  EXPECT_DOUBLE_EQ(samples[0].weight, 2.5);
  EXPECT_EQ(samples[0].cpu_delta_ns, 1 * kNsPerMs);  // what ran before it left
}

// Woken at 5 ms but run only at 11 ms (a busy machine): 4 ms asleep, 6 ms waiting for a CPU.
TEST(ThreadAccounting, AWaitForACpuAfterTheWakingIsItsOwnSample) {
  ThreadAccounting accounting(at_ms(0), cpu_ms(0));
  std::vector<ThreadSample> samples;
  accounting.switched_out(kOffCpuRules, at_ms(1), cpu_ms(1), 42, samples);
  accounting.switched_in(kOffCpuRules, at_ms(11), samples,
                         ThreadAccounting::Runnable{at_ms(5), 43});
  ASSERT_EQ(samples.size(), 2u);
  EXPECT_EQ(samples[0].time, at_ms(1));
  EXPECT_EQ(samples[0].stack, 42u);
  EXPECT_DOUBLE_EQ(samples[0].weight, 4.0);
  EXPECT_EQ(samples[1].time, at_ms(5));
  EXPECT_EQ(samples[1].stack, 43u);
  EXPECT_DOUBLE_EQ(samples[1].weight, 6.0);
  EXPECT_EQ(samples[1].cpu_delta_ns, 0u);  // no CPU time while off the CPU
}

// A run-queue delay under an interval stays part of the wait (no extra sample per wakeup).
TEST(ThreadAccounting, AShortDelayAfterTheWakingStaysInTheWait) {
  ThreadAccounting accounting(at_ms(0), cpu_ms(0));
  std::vector<ThreadSample> samples;
  accounting.switched_out(kOffCpuRules, at_ms(1), cpu_ms(1), 42, samples);
  accounting.switched_in(kOffCpuRules, at_ms(5.5), samples,
                         ThreadAccounting::Runnable{at_ms(5), 43});
  ASSERT_EQ(samples.size(), 1u);
  EXPECT_EQ(samples[0].stack, 42u);
  EXPECT_DOUBLE_EQ(samples[0].weight, 4.5);
}

TEST(ThreadAccounting, ShortWaitsAddUpUnderTheLongestOnesStack) {
  ThreadAccounting accounting(at_ms(0), cpu_ms(0));
  std::vector<ThreadSample> samples;
  accounting.switched_out(kOffCpuRules, at_ms(1), cpu_ms(0), 1, samples);
  accounting.switched_in(kOffCpuRules, at_ms(1.3), samples);
  accounting.switched_out(kOffCpuRules, at_ms(2), cpu_ms(0), 2, samples);
  accounting.switched_in(kOffCpuRules, at_ms(2.5), samples);
  EXPECT_TRUE(samples.empty());  // 0.8 ms: not an interval yet
  accounting.switched_out(kOffCpuRules, at_ms(3), cpu_ms(0), 3, samples);
  accounting.switched_in(kOffCpuRules, at_ms(3.2), samples);
  ASSERT_EQ(samples.size(), 1u);
  EXPECT_EQ(samples[0].stack, 2u);  // the longest of the three
  EXPECT_NEAR(samples[0].weight, 1.0, 1e-9);
}

TEST(ThreadAccounting, ASampleWhileOffCpuClosesTheWaitItsSwitchInWasLost) {
  ThreadAccounting accounting(at_ms(0), cpu_ms(0));
  std::vector<ThreadSample> samples;
  accounting.switched_out(kOffCpuRules, at_ms(1), cpu_ms(1), 5, samples);
  accounting.on_cpu_sample(kOffCpuRules, at_ms(4), cpu_ms(1.5), 6, samples);
  ASSERT_EQ(samples.size(), 2u);
  EXPECT_DOUBLE_EQ(samples[0].weight, 3.0);
  EXPECT_EQ(samples[1].stack, 6u);
  EXPECT_EQ(accounting.state(), ThreadAccounting::State::kOnCpu);
}

TEST(ThreadAccounting, WithoutOffCpuRecordingASwitchOutIsAMarker) {
  const AccountingRules rules{.interval_ns = kNsPerMs, .off_cpu = false};
  ThreadAccounting accounting(at_ms(0), cpu_ms(0));
  std::vector<ThreadSample> samples;
  accounting.switched_out(rules, at_ms(1), cpu_ms(1), 9, samples);
  ASSERT_EQ(samples.size(), 1u);
  EXPECT_EQ(samples[0].weight, 0.0);
  EXPECT_EQ(accounting.state(), ThreadAccounting::State::kOnCpu);
}

TEST(ThreadAccounting, AnUnknownBaselineCountsOnlyFromTheFirstRuntimeSeen) {
  ThreadAccounting accounting(at_ms(0), std::nullopt);
  std::vector<ThreadSample> samples;
  accounting.on_cpu_sample(kOffCpuRules, at_ms(1), cpu_ms(500), 1, samples);
  accounting.on_cpu_sample(kOffCpuRules, at_ms(2), cpu_ms(501), 2, samples);
  accounting.exited(kOffCpuRules, at_ms(2.5), cpu_ms(501.5), samples);
  accounting.finish(kOffCpuRules, at_ms(3), samples);
  ASSERT_EQ(samples.size(), 2u);
  EXPECT_EQ(samples[0].cpu_delta_ns, 0u);  // the 500 ms before it was seen are not ours
  EXPECT_EQ(samples[1].cpu_delta_ns, kNsPerMs + kNsPerMs / 2);
}

TEST(ThreadAccounting, AWaitOpenAtTheEndIsClosedThere) {
  ThreadAccounting accounting(at_ms(0), cpu_ms(0));
  std::vector<ThreadSample> samples;
  accounting.switched_out(kOffCpuRules, at_ms(1), cpu_ms(1), 4, samples);
  accounting.finish(kOffCpuRules, at_ms(11), samples);
  ASSERT_EQ(samples.size(), 1u);
  EXPECT_DOUBLE_EQ(samples[0].weight, 10.0);
}

}  // namespace
}  // namespace bpfprof
