#include "userspace/output/waker_labels.h"

#include <algorithm>
#include <map>
#include <set>

#include "userspace/output/profile_builder.h"

namespace bpfprof {

namespace {

// The wake-up machinery between whatever woke a thread and the scheduler: skipped to find the
// function that did (hrtimer_wakeup, pipe_write, futex_wake).
bool is_wake_up_function(const std::string& name) {
  for (const char* prefix : {"try_to_wake_up", "wake_up", "__wake_up", "ttwu", "autoremove_wake",
                             "default_wake_function", "woken_wake_function", "swake_up",
                             "__swake_up", "rcuwait_wake_up", "wake_q", "complete"})
    if (name.starts_with(prefix)) return true;
  return false;
}

const char* state_name(OffCpuState state) {
  return state == OffCpuState::kIoWait ? "I/O wait" : "sleeping";
}

// Where a softirq's handlers run (handle_softirqs since 6.10, __do_softirq before).
bool is_softirq_function(const std::string& name) {
  return name == "handle_softirqs" || name == "__do_softirq";
}

}  // namespace

bool is_tracing_function(const std::string& name) {
  return name.starts_with("bpf_prog_") || name.starts_with("bpf_trace_run") ||
         name.starts_with("__bpf_trace_") || name.starts_with("__traceiter_") ||
         name.starts_with("bpf_trampoline_");
}

std::string WakerLabels::process_label(ProcessIndex index) const {
  const Process& p = model_.processes()[index.value];
  return p.name + " (" + std::to_string(p.pid.value) + ")";
}

// "comm (tid)" for a thread; for an interrupt, what it was and the function that woke the
// thread, from its stack: "interrupt: hrtimer_wakeup".
std::string WakerLabels::label(const Waker& waker, std::optional<StackIndex> cause) const {
  if (waker.context == WakerContext::kThread)
    return waker.comm + " (" + std::to_string(waker.tid.value) + ")";
  const std::string function = waking_function(cause);
  return interrupt_kind(cause) + (function.empty() ? "" : ": " + function);
}

// The waker's stack as written, without the profiler's own frames at its leaf (the
// sched_waking program and the tracepoint machinery under it).
std::optional<StackIndex> WakerLabels::cause_stack(std::optional<StackId> stack) const {
  if (!stack) return std::nullopt;
  std::optional<StackIndex> out = output_stack_of_[*stack];
  while (out && is_tracing_function(function_name(shared_, shared_.stacks.frame(*out))))
    out = shared_.stacks.prefix(*out);
  return out;
}

// The innermost function of a waker's stack that is not wake-up machinery: what woke the
// thread, for an interrupt (hrtimer_wakeup: a timer expired).
std::string WakerLabels::waking_function(std::optional<StackIndex> cause) const {
  for (std::optional<StackIndex> s = cause; s; s = shared_.stacks.prefix(*s)) {
    const std::string& name = function_name(shared_, shared_.stacks.frame(*s));
    if (!is_wake_up_function(name)) return name;
  }
  return "";
}

// "softirq" when the waker's kernel stack runs a softirq's handlers, else "interrupt".
std::string WakerLabels::interrupt_kind(std::optional<StackIndex> cause) const {
  for (std::optional<StackIndex> s = cause; s; s = shared_.stacks.prefix(*s))
    if (is_softirq_function(function_name(shared_, shared_.stacks.frame(*s)))) return "softirq";
  return "interrupt";
}

void WakerLabels::add_woken_markers(const Thread& thread, MonotonicNs zero, MarkersTable& markers) {
  for (const WokenWait& wait : thread.woken_waits) {
    const Waker& waker = model_.wakers()[wait.waker];
    MarkersTable::Woken data;
    data.state = state_name(wait.state);
    data.duration_ms = static_cast<double>(wait.woken.value - wait.start.value) / 1e6;
    data.cause = cause_stack(wait.cause);
    data.waker = label(waker, data.cause);
    if (waker.context == WakerContext::kThread) {
      data.waker_thread = waker.comm;
      data.waker_tid = waker.tid.value;
      data.waker_process = wait.waker_process ? process_label(*wait.waker_process)
                                              : "pid " + std::to_string(waker.pid.value);
    } else {
      data.waker_thread = interrupt_kind(data.cause);
    }
    const StringIndex name = shared_.strings.intern("Woken by " + data.waker);
    markers.add(
        {name, ms_between(zero, wait.start), std::move(data), ms_between(zero, wait.woken)});
  }
}

std::pair<uint64_t, ProcessWakers> WakerLabels::process_wakers(ProcessIndex index) const {
  const Process& p = model_.processes()[index.value];
  // By label: interrupts of one kind through one function are one waker.
  std::map<std::string, WakerShare> by_label;
  auto add = [&](const std::string& label, const WakerShare& share) {
    by_label[label].waited_ns += share.waited_ns;
    by_label[label].wakings += share.wakings;
  };
  for (const auto& [waker, share] : p.wakers) add(label(model_.wakers()[waker], {}), share);
  const Waker interrupt{WakerContext::kInterrupt, Pid{0}, Tid{0}, ""};
  for (const auto& [stack, share] : p.interrupt_wakers)
    add(label(interrupt, stack == ResolvedStackTree::kRoot ? std::nullopt : cause_stack(stack)),
        share);
  std::vector<std::pair<std::string, WakerShare>> shares(by_label.begin(), by_label.end());
  std::stable_sort(shares.begin(), shares.end(), [](const auto& a, const auto& b) {
    return a.second.waited_ns > b.second.waited_ns;
  });
  uint64_t total = 0;
  for (const auto& [label, share] : shares) total += share.waited_ns;
  ProcessWakers entry{process_label(index), {}};
  for (size_t i = 0; i < shares.size() && i < 5; ++i)
    entry.top.push_back(WakerTotal{shares[i].first,
                                   static_cast<double>(shares[i].second.waited_ns) / 1e6,
                                   shares[i].second.wakings});
  return {total, std::move(entry)};
}

std::vector<ProcessWakers> WakerLabels::top_wakers(
    const std::vector<const Thread*>& threads) const {
  std::set<uint32_t> seen;
  std::vector<std::pair<uint64_t, ProcessWakers>> ranked;
  for (const Thread* th : threads) {
    if (!seen.insert(th->process.value).second) continue;
    const Process& p = model_.processes()[th->process.value];
    if (p.wakers.empty() && p.interrupt_wakers.empty()) continue;
    ranked.push_back(process_wakers(th->process));
  }
  std::stable_sort(ranked.begin(), ranked.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<ProcessWakers> top;
  for (size_t i = 0; i < ranked.size() && i < 5; ++i) top.push_back(std::move(ranked[i].second));
  return top;
}

}  // namespace bpfprof
