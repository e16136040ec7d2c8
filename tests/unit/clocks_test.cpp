// The wall clock at a monotonic time (userspace/model/clocks.h): what the profile's start time
// is, against which the programs' own wall-clock times are placed.
#include <gtest/gtest.h>

#include <cmath>

#include "userspace/model/clocks.h"

namespace bpfprof {
namespace {

TEST(Clocks, TheWallClockAtAMonotonicTime) {
  const MonotonicNs now = monotonic_now();
  const double wall = wall_clock_ms_now();
  EXPECT_NEAR(wall_clock_ms_at(now), wall, 1.0);
  // A second earlier on one clock is a second earlier on the other.
  EXPECT_NEAR(wall_clock_ms_at(MonotonicNs{now.value - 1'000'000'000}), wall - 1000.0, 1.0);
}

}  // namespace
}  // namespace bpfprof
