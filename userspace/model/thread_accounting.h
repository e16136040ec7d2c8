// The CPU and off-CPU accounting of one thread: a small state machine that turns its timer
// samples, switches and runtimes (the kernel's sum_exec_runtime) into weighted samples that
// carry the CPU time used since the sample before.
//
//   states:  on CPU (or not known to be off)  --switch-out-->  off CPU since t, in a stack
//            off CPU  --switch-in / a sample / exit / end-->  on CPU, the wait written
//
// Waits of at least one sampling interval become one sample weighted by their length;
// shorter ones are summed and written with the stack of the longest once they make an
// interval. Without off-CPU recording no switch-in comes: a switch-out only marks where the
// running stack ends (weight 0).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "userspace/model/ids.h"
#include "userspace/model/recording.h"

namespace bpfprof {

// A node of the model's resolved stack tree (its PrefixTree::NodeId).
using StackId = uint32_t;

struct ThreadSample {
  MonotonicNs time;
  StackId stack;
  uint64_t cpu_delta_ns;  // CPU time used since the thread's previous sample (or its start)
  // In sampling intervals: 1 for a timer sample; for an off-CPU sample, how long the thread
  // was off the CPU (may be fractional); 0 for a mere "left the CPU here" marker.
  double weight = 1.0;
};

// The part of `sample` from `t` on, or nullopt if it lies wholly before `t`. A collapsed run
// of ticks (weight n: n ticks of one stack an interval apart from its time on) or a wait
// (weight intervals long from its time on) that began before `t` keeps its ticks (its time)
// from `t` on, with their share of its CPU time: a window that starts in the middle of a
// long run (--flight-recorder) is full from its start.
std::optional<ThreadSample> sample_part_from(const ThreadSample& sample, MonotonicNs t,
                                             uint64_t interval_ns);

struct AccountingRules {
  uint64_t interval_ns = 1000000;  // the sampling interval: off-CPU weights are in its units
  bool off_cpu = false;            // switch-ins come (off-CPU recording)
  // Consecutive identical timer samples (within two intervals) become one, weights summed.
  bool collapse_repeated_samples = true;
};

class ThreadAccounting {
 public:
  enum class State : uint8_t { kOnCpu, kOffCpu };

  // `runtime_baseline`: the thread's runtime when it was first seen; nullopt if unknown (its
  // first sample then only sets it).
  ThreadAccounting(MonotonicNs start, std::optional<CpuTimeNs> runtime_baseline)
      : start_(start), runtime_(runtime_baseline) {}

  State state() const { return off_cpu_ ? State::kOffCpu : State::kOnCpu; }
  std::optional<CpuTimeNs> runtime() const { return runtime_; }  // the latest known

  void on_cpu_sample(const AccountingRules& rules, MonotonicNs t, CpuTimeNs runtime, StackId stack,
                     std::vector<ThreadSample>& samples);
  // `stack` ends in the off-CPU state frame.
  void switched_out(const AccountingRules& rules, MonotonicNs t, CpuTimeNs runtime, StackId stack,
                    std::vector<ThreadSample>& samples);
  // A waking ended the thread's wait at `since`; from then on it waited for a CPU, in
  // `stack` (the wait's stack ending in [waiting for CPU]).
  struct Runnable {
    MonotonicNs since;
    StackId stack;
  };
  // With `runnable`, a wait for a CPU after the waking of at least an interval is its own
  // sample: the time a busy machine makes a woken thread wait is not time it slept.
  static bool waits_for_cpu_apart(const AccountingRules& rules, MonotonicNs woken, MonotonicNs t) {
    return t.value >= woken.value + rules.interval_ns;
  }
  void switched_in(const AccountingRules& rules, MonotonicNs t, std::vector<ThreadSample>& samples,
                   std::optional<Runnable> runnable = std::nullopt);
  void exited(const AccountingRules& rules, MonotonicNs t, CpuTimeNs runtime,
              std::vector<ThreadSample>& samples);
  // Closes an open wait at `end`, writes the short waits still summed, and gives the
  // remaining CPU time to the last sample.
  void finish(const AccountingRules& rules, MonotonicNs end, std::vector<ThreadSample>& samples);
  // The stacks it keeps (an open wait's, the longest short wait's) as `move` maps them into
  // a new stack tree.
  template <typename Move>
  void move_stacks(Move&& move) {
    if (off_cpu_) off_cpu_->stack = move(off_cpu_->stack);
    if (short_waits_ns_ > 0) longest_short_wait_stack_ = move(longest_short_wait_stack_);
  }
  // Every sample of the thread was dropped (written out by a rotating output); the latest
  // was at `last`. The next sample starts from there and joins none.
  void samples_dropped(MonotonicNs last) {
    last_sample_is_tick_ = false;
    if (last.value > start_.value) start_ = last;
  }

 private:
  struct OffCpuInterval {
    MonotonicNs since;
    StackId stack;
  };
  void add_runtime(CpuTimeNs runtime);
  uint64_t take_cpu(MonotonicNs t, const std::vector<ThreadSample>& samples);
  void close_wait(const AccountingRules& rules, MonotonicNs since, MonotonicNs end, StackId stack,
                  std::vector<ThreadSample>& samples);
  void flush_short_waits(const AccountingRules& rules, MonotonicNs t,
                         std::vector<ThreadSample>& samples);
  void push(std::vector<ThreadSample>& samples, const ThreadSample& sample);

  MonotonicNs start_;
  std::optional<CpuTimeNs> runtime_;  // at the previous sample
  // The kernel brings a running task's runtime up to date only at scheduler ticks, so a
  // sample can report CPU time that belongs to earlier samples. Runtime not yet given to a
  // sample waits here; no sample gets more than the wall time since the one before.
  uint64_t unattributed_cpu_ns_ = 0;
  std::optional<OffCpuInterval> off_cpu_;  // open while the thread is off the CPU
  // Waits shorter than a sampling interval, summed until they make one.
  uint64_t short_waits_ns_ = 0;
  MonotonicNs last_short_wait_;  // when the latest of them began
  StackId longest_short_wait_stack_ = 0;
  uint64_t longest_short_wait_ns_ = 0;
  // The last sample is a timer sample that the next one may join.
  bool last_sample_is_tick_ = false;
  MonotonicNs last_tick_;  // the latest timer sample's time, also when it joined the one before
};

}  // namespace bpfprof
