// The clocks bpfprof reads: CLOCK_MONOTONIC (the one time base of events and samples), the
// wall clock (the profile's start time), and CPU time (what the recorder itself costs).
#pragma once

#include <time.h>

#include "userspace/model/ids.h"

namespace bpfprof {

inline MonotonicNs monotonic_now() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return MonotonicNs{static_cast<uint64_t>(ts.tv_sec) * 1000000000ull +
                     static_cast<uint64_t>(ts.tv_nsec)};
}

// Milliseconds from `start` to `t` (negative when t is earlier).
inline double ms_between(MonotonicNs start, MonotonicNs t) {
  return (static_cast<double>(t.value) - static_cast<double>(start.value)) / 1e6;
}

inline double milliseconds(const timespec& ts) {
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

inline double wall_clock_ms_now() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return milliseconds(ts);
}

// The wall clock at monotonic time `t`, from the closest of a few back-to-back readings of both
// clocks: one read across a preemption (a loaded machine's, milliseconds) would put every time
// of the profile off by as long against the programs' own wall clocks.
inline double wall_clock_ms_at(MonotonicNs t) {
  double best_gap = 0;
  double wall_at_t = 0;
  for (int i = 0; i < 5; ++i) {
    const MonotonicNs before = monotonic_now();
    const double wall = wall_clock_ms_now();
    const double gap = ms_between(before, monotonic_now());
    if (i == 0 || gap < best_gap) {
      best_gap = gap;
      wall_at_t = wall - ms_between(t, before) - gap / 2;
    }
  }
  return wall_at_t;
}

// CPU time of the calling thread.
inline double thread_cpu_ms() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return milliseconds(ts);
}

// CPU time of this process, all threads (not of the command it waits for).
inline double process_cpu_ms() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return milliseconds(ts);
}

}  // namespace bpfprof
