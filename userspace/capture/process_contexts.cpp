#include "userspace/capture/process_contexts.h"

#include "symbols/util/read_file.h"

namespace bpfprof {

std::optional<ProcessContext> read_process_context(Pid pid, const std::string& proc) {
  const std::string dir = proc + "/" + std::to_string(pid.value);
  const std::optional<std::string> cgroups = read_entire_file(dir + "/cgroup");
  if (!cgroups) return std::nullopt;
  ProcessContext context = context_from_cgroups(*cgroups);
  if (const std::optional<std::string> status = read_entire_file(dir + "/status"))
    context.namespace_pid = namespace_pid_from_status(*status);
  return context;
}

void append_process_contexts(std::vector<LifecycleEvent>& events, size_t from,
                             const std::string& proc) {
  const size_t end = events.size();
  for (size_t i = from; i < end; ++i) {
    Pid pid;  // events grows below: no reference into it is kept
    if (const auto* exec = std::get_if<ExecEvent>(&events[i].payload))
      pid = exec->pid;
    else if (const auto* existing = std::get_if<ExistingProcessEvent>(&events[i].payload))
      pid = existing->pid;
    else
      continue;
    if (std::optional<ProcessContext> context = read_process_context(pid, proc))
      events.push_back(
          LifecycleEvent{events[i].time, ProcessContextEvent{pid, std::move(*context)}});
  }
}

}  // namespace bpfprof
