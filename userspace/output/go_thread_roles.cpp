#include "userspace/output/go_thread_roles.h"

#include <algorithm>
#include <map>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "userspace/output/profile_builder.h"

namespace bpfprof {
namespace {

// Frames of the runtime between a thread's start and what it runs.
bool is_thread_start(std::string_view name) {
  return name == "runtime.mstart" || name == "runtime.mstart0" || name == "runtime.mstart1" ||
         name == "runtime.rt0_go" || name == "runtime.mstart_stub" || name == "runtime.main";
}

// A function literal's name: the enclosing function's, then .funcN (and .N for nested ones).
bool is_closure(std::string_view name) {
  const size_t at = name.rfind(".func");
  if (at == std::string_view::npos || at + 5 == name.size()) return false;
  return name.find_first_not_of("0123456789.", at + 5) == std::string_view::npos;
}

// The role of one stack, outermost frame first; empty where it does not begin at a Go root.
std::string stack_role(const std::vector<std::string_view>& names) {
  if (names.empty()) return {};
  if (names[0] == "runtime.goexit") {
    // `go func() { work() }()`: the closure says less than the function it calls.
    const bool closure = names.size() > 2 && is_closure(names[1]);
    return names.size() > 1 ? std::string(names[closure ? 2 : 1]) : std::string();
  }
  if (names[0] == "runtime.mcall" || names[0] == "runtime.morestack") return "scheduler";
  if (names[0] == "runtime.systemstack") return "system stack";
  if (names[0] != "runtime.mstart" && names[0] != "runtime.rt0_go") return {};
  for (std::string_view name : names) {
    if (is_thread_start(name)) continue;
    if (name == "runtime.schedule" || name == "runtime.stopm" || name == "runtime.findRunnable" ||
        name == "runtime.findrunnable")
      return "scheduler";
    return std::string(name);
  }
  return "scheduler";
}

// The stack's function names from its outermost frame, but a label set's (which is not code).
std::vector<std::string_view> names_root_first(const SharedTables& shared, StackIndex stack) {
  std::vector<std::string_view> names;
  for (std::optional<StackIndex> at = stack; at && names.size() < 4096;
       at = shared.stacks.prefix(*at)) {
    const FrameIndex frame = shared.stacks.frame(*at);
    if (!shared.frames[frame].is_label_set()) names.push_back(function_name(shared, frame));
  }
  std::reverse(names.begin(), names.end());
  return names;
}

}  // namespace

std::optional<std::string> go_thread_role(const SharedTables& shared, const SamplesTable& samples) {
  std::unordered_map<uint32_t, std::string> role_of_stack;
  // By CPU time where the thread ran (an M parked in the scheduler has many off-CPU samples
  // and little CPU), else by samples.
  std::map<std::string, std::pair<double, double>> role_cpu_and_weight;
  double total_cpu = 0, total_weight = 0;
  for (size_t i = 0; i < samples.size(); ++i) {
    const SamplesTable::Sample sample = samples.row(i);
    if (!sample.stack) continue;
    total_cpu += static_cast<double>(sample.cpu_delta_ns);
    total_weight += sample.weight;
    auto [it, added] = role_of_stack.try_emplace(sample.stack->value);
    if (added) it->second = stack_role(names_root_first(shared, *sample.stack));
    if (it->second.empty()) continue;
    auto& [cpu, weight] = role_cpu_and_weight[it->second];
    cpu += static_cast<double>(sample.cpu_delta_ns);
    weight += sample.weight;
  }
  const bool by_cpu = total_cpu > 0;
  auto measure = [&](const std::pair<double, double>& m) { return by_cpu ? m.first : m.second; };
  double go_total = 0;
  const std::string* top = nullptr;
  double top_measure = 0;
  for (const auto& [role, m] : role_cpu_and_weight) {
    go_total += measure(m);
    if (!top || measure(m) > top_measure) top = &role, top_measure = measure(m);
  }
  if (!top || go_total * 2 < (by_cpu ? total_cpu : total_weight)) return std::nullopt;
  return *top;
}

}  // namespace bpfprof
