#include "userspace/model/thread_accounting.h"

#include <algorithm>
#include <cmath>

namespace bpfprof {

namespace {

double in_intervals(uint64_t ns, const AccountingRules& rules) {
  return static_cast<double>(ns) / static_cast<double>(rules.interval_ns);
}

}  // namespace

void ThreadAccounting::add_runtime(CpuTimeNs runtime) {
  if (runtime_ && runtime.value >= runtime_->value)
    unattributed_cpu_ns_ += runtime.value - runtime_->value;
  runtime_ = runtime;
}

std::optional<ThreadSample> sample_part_from(const ThreadSample& sample, MonotonicNs t,
                                             uint64_t interval_ns) {
  if (sample.time.value >= t.value) return sample;
  if (interval_ns == 0) return std::nullopt;
  const double before = double(t.value - sample.time.value) / double(interval_ns);
  const bool ticks = sample.weight >= 1.0 && std::floor(sample.weight) == sample.weight;
  const double cut = ticks ? std::ceil(before) : before;  // ticks stay on their times
  if (cut >= sample.weight) return std::nullopt;
  ThreadSample part = sample;
  part.time.value += ticks ? static_cast<uint64_t>(cut) * interval_ns : t.value - sample.time.value;
  part.weight = sample.weight - cut;
  part.cpu_delta_ns =
      static_cast<uint64_t>(double(sample.cpu_delta_ns) * part.weight / sample.weight);
  return part;
}

uint64_t ThreadAccounting::take_cpu(MonotonicNs t, const std::vector<ThreadSample>& samples) {
  const MonotonicNs previous = last_sample_is_tick_ ? last_tick_
                               : samples.empty()    ? start_
                                                    : samples.back().time;
  const uint64_t wall = t.value > previous.value ? t.value - previous.value : 0;
  const uint64_t delta = std::min(unattributed_cpu_ns_, wall);
  unattributed_cpu_ns_ -= delta;
  return delta;
}

void ThreadAccounting::push(std::vector<ThreadSample>& samples, const ThreadSample& sample) {
  samples.push_back(sample);
  last_sample_is_tick_ = false;
}

void ThreadAccounting::on_cpu_sample(const AccountingRules& rules, MonotonicNs t, CpuTimeNs runtime,
                                     StackId stack, std::vector<ThreadSample>& samples) {
  switched_in(rules, t, samples);  // running, so its switch-in was lost
  add_runtime(runtime);
  const uint64_t cpu = take_cpu(t, samples);
  // Never into a thread's first sample: the profiler ignores the first threadCPUDelta (it
  // cannot know since when it counts), and a thread that spins on one stack from its first
  // sample showed a third of its CPU time.
  if (rules.collapse_repeated_samples && last_sample_is_tick_ && samples.size() > 1 &&
      samples.back().stack == stack && t.value - last_tick_.value < 2 * rules.interval_ns) {
    samples.back().weight += 1.0;
    samples.back().cpu_delta_ns += cpu;
  } else {
    samples.push_back(ThreadSample{t, stack, cpu, 1.0});
  }
  last_sample_is_tick_ = true;
  last_tick_ = t;
}

void ThreadAccounting::switched_out(const AccountingRules& rules, MonotonicNs t, CpuTimeNs runtime,
                                    StackId stack, std::vector<ThreadSample>& samples) {
  switched_in(rules, t, samples);  // two switch-outs in a row: the switch-in was lost
  add_runtime(runtime);            // exact here: the scheduler just brought it up to date
  if (rules.off_cpu)
    off_cpu_ = OffCpuInterval{t, stack};
  else
    push(samples, ThreadSample{t, stack, take_cpu(t, samples), 0.0});
}

void ThreadAccounting::switched_in(const AccountingRules& rules, MonotonicNs t,
                                   std::vector<ThreadSample>& samples,
                                   std::optional<Runnable> runnable) {
  if (!off_cpu_) return;
  const OffCpuInterval wait = *off_cpu_;
  off_cpu_.reset();
  if (runnable && runnable->since > wait.since && waits_for_cpu_apart(rules, runnable->since, t)) {
    close_wait(rules, wait.since, runnable->since, wait.stack, samples);
    close_wait(rules, runnable->since, t, runnable->stack, samples);
    return;
  }
  close_wait(rules, wait.since, t, wait.stack, samples);
}

// One off-CPU interval: a sample of its own from an interval on, else summed with the other
// short ones.
void ThreadAccounting::close_wait(const AccountingRules& rules, MonotonicNs since, MonotonicNs end,
                                  StackId stack, std::vector<ThreadSample>& samples) {
  const uint64_t blocked = end.value > since.value ? end.value - since.value : 0;
  if (blocked >= rules.interval_ns) {
    flush_short_waits(rules, since, samples);
    push(samples,
         ThreadSample{since, stack, take_cpu(since, samples), in_intervals(blocked, rules)});
    return;
  }
  short_waits_ns_ += blocked;
  last_short_wait_ = since;
  if (blocked >= longest_short_wait_ns_) {
    longest_short_wait_ns_ = blocked;
    longest_short_wait_stack_ = stack;
  }
  if (short_waits_ns_ >= rules.interval_ns) flush_short_waits(rules, since, samples);
}

void ThreadAccounting::flush_short_waits(const AccountingRules& rules, MonotonicNs t,
                                         std::vector<ThreadSample>& samples) {
  if (short_waits_ns_ == 0) return;
  push(samples, ThreadSample{t, longest_short_wait_stack_, take_cpu(t, samples),
                             in_intervals(short_waits_ns_, rules)});
  short_waits_ns_ = 0;
  longest_short_wait_ns_ = 0;
}

void ThreadAccounting::exited(const AccountingRules& rules, MonotonicNs t, CpuTimeNs runtime,
                              std::vector<ThreadSample>& samples) {
  switched_in(rules, t, samples);
  if (runtime_ && runtime.value > runtime_->value) add_runtime(runtime);
}

void ThreadAccounting::finish(const AccountingRules& rules, MonotonicNs end,
                              std::vector<ThreadSample>& samples) {
  switched_in(rules, end, samples);
  if (short_waits_ns_) {
    // Shown when the latest of the waits began (never before the thread's last sample).
    MonotonicNs at = last_short_wait_;
    if (!samples.empty() && samples.back().time > at) at = samples.back().time;
    if (last_sample_is_tick_ && last_tick_ > at) at = last_tick_;
    flush_short_waits(rules, at, samples);
  }
  if (samples.empty() || unattributed_cpu_ns_ == 0) return;
  samples.back().cpu_delta_ns += unattributed_cpu_ns_;
  unattributed_cpu_ns_ = 0;
}

}  // namespace bpfprof
