#include "userspace/output/run_report.h"
#include "userspace/model/unwind_report.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <numeric>
#include <unordered_map>

#include "symbols/dwarf/debug_hint.h"
#include "symbols/util/untrusted_file.h"

namespace bpfprof {

namespace {

// "name (pid)" with the name of the pid's latest process entry.
std::string process_label(const SessionModel& model, Pid pid) {
  std::string name = "?";
  for (const Process& p : model.processes())
    if (p.pid == pid) name = p.name;
  return name + " (" + std::to_string(pid.value) + ")";
}

void add_losses(const Recording& recording, const SessionModel& model, RunReport& report) {
  const RecordingStats& stats = recording.stats;
  report.lost_ring_buffer_events = stats.lost_bpf_events;
  report.lost_events = stats.lost_bpf_events + stats.lost_sideband_records;
  report.late_events = stats.late_events;
  report.processes_not_followed = stats.processes_not_followed;
  report.max_tracked_processes = stats.max_tracked_processes;
  // Where they were lost is only told when the ring buffer lost any.
  if (!stats.lost_bpf_events) return;
  for (size_t cpu = 0; cpu < stats.lost_bpf_events_per_cpu.size(); ++cpu)
    if (uint64_t n = stats.lost_bpf_events_per_cpu[cpu])
      report.lost_by_cpu.push_back({static_cast<uint32_t>(cpu), n});
  std::unordered_map<Pid, uint64_t> by_process;
  for (const LossRecord& loss : recording.losses) by_process[loss.pid] += loss.count;
  std::vector<std::pair<Pid, uint64_t>> sorted(by_process.begin(), by_process.end());
  std::sort(sorted.begin(), sorted.end(),
            [](const auto& a, const auto& b) { return a.second > b.second; });
  for (const auto& [pid, count] : sorted)
    report.lost_by_process.push_back({pid, process_label(model, pid), count});
}

std::optional<UnwindCost> unwind_cost(const Recording& recording) {
  const RecordingStats& s = recording.stats;
  if (!s.copied_stacks) return std::nullopt;
  UnwindCost cost;
  cost.copied_stacks = s.copied_stacks;
  cost.user_stacks = s.user_stacks_taken;
  std::vector<uint32_t> times = s.unwind_ns;
  std::nth_element(times.begin(), times.begin() + times.size() / 2, times.end());
  cost.median_us = times.empty() ? 0.0 : times[times.size() / 2] / 1000.0;
  if (!times.empty()) {
    const double kept_ns = std::accumulate(times.begin(), times.end(), 0.0);
    cost.total_ms =
        kept_ns / static_cast<double>(times.size()) * static_cast<double>(s.copied_stacks) / 1e6;
  }
  const double per_copy = 1.0 / static_cast<double>(s.copied_stacks);
  cost.stack_bytes_per_copy = static_cast<double>(s.stack_copy_bytes) * per_copy;
  cost.event_bytes_per_copy = static_cast<double>(s.copy_event_bytes) * per_copy;
  cost.raised_stack_copies.assign(s.raised_stack_copies.begin(), s.raised_stack_copies.end());
  cost.cut_at_copy_end_share = static_cast<double>(s.stacks_cut_at_copy_end) * per_copy;
  cost.often_cut_at_copy_end = s.stacks_cut_at_copy_end * 100 > s.copied_stacks;
  cost.fixed_stack_copy_size = recording.fixed_stack_copy_size;
  return cost;
}

std::vector<ProcessCpuTime> processes_by_cpu_time(const SessionModel& model) {
  std::vector<ProcessCpuTime> processes;
  for (const Process& p : model.processes()) {
    if (p.is_launcher) continue;
    uint64_t cpu = 0;
    for (ThreadIndex t : p.threads)
      for (const ThreadSample& s : model.threads()[t.value].samples) cpu += s.cpu_delta_ns;
    if (cpu) processes.push_back({p.name, p.pid, cpu});
  }
  std::sort(processes.begin(), processes.end(),
            [](const auto& a, const auto& b) { return a.cpu_ns > b.cpu_ns; });
  return processes;
}

std::vector<ContextCpuTime> contexts_by_cpu_time(const SessionModel& model) {
  std::map<std::string, ContextCpuTime> by_label;
  bool containers = false;
  for (const Process& p : model.processes()) {
    if (p.is_launcher) continue;
    uint64_t cpu = 0;
    for (ThreadIndex t : p.threads)
      for (const ThreadSample& s : model.threads()[t.value].samples) cpu += s.cpu_delta_ns;
    if (!cpu) continue;
    containers = containers || p.context.runtime || !p.context.pod_uid.empty();
    std::string label = context_label(p.context);
    if (label.empty()) label = "(none)";
    ContextCpuTime& c = by_label[label];
    c.label = label;
    c.processes += 1;
    c.cpu_ns += cpu;
  }
  if (!containers && by_label.size() < 2) return {};
  std::vector<ContextCpuTime> contexts;
  for (auto& [label, c] : by_label) contexts.push_back(std::move(c));
  std::sort(contexts.begin(), contexts.end(),
            [](const auto& a, const auto& b) { return a.cpu_ns > b.cpu_ns; });
  return contexts;
}

// "a 12.3%, b 4.5%" of the first `count` (name, share) pairs.

void add_runtime_entries(RuntimeKind runtime, const RuntimeStats& stats,
                         std::vector<ReportEntry>& entries) {
  const std::string name(runtime_name(runtime));
  if (runtime == RuntimeKind::kGoLabels) {
    if (stats.stacks)
      entries.push_back({"Stacks of labelling Go programs with a label set", "percentage",
                         static_cast<double>(stats.merged) / static_cast<double>(stats.stacks)});
    return;
  }
  if (stats.stacks)
    entries.push_back({name + " stacks with " + name + " frames", "percentage",
                       static_cast<double>(stats.merged) / static_cast<double>(stats.stacks)});
  if (stats.interpreters)
    entries.push_back({name + " code objects read", "integer", stats.code_objects_read});
  if (stats.read_budget_used_up)
    entries.push_back(
        {name + " processes over the code-object budget", "integer", stats.read_budget_used_up});
  std::string not_read;
  for (const auto& [file, reason] : stats.not_read)
    not_read += (not_read.empty() ? "" : "; ") + file + ": " + reason;
  if (!not_read.empty()) entries.push_back({name + " interpreters not read", "string", not_read});
}

}  // namespace

std::string shares_text(const std::vector<std::pair<std::string, double>>& shares, size_t count) {
  std::string text;
  for (size_t i = 0; i < shares.size() && i < count; ++i) {
    char share[32];
    snprintf(share, sizeof share, " %.1f%%", 100.0 * shares[i].second);
    text += (i ? ", " : "") + shares[i].first + share;
  }
  return text;
}

RunReport build_run_report(const Recording& recording, const SessionModel& model,
                           const ProfileSummary& summary) {
  RunReport report;
  report.call_graph = recording.call_graph;
  report.sampling_event = recording.sampling_event;
  report.frequency_hz = recording.frequency_hz;
  report.samples = recording.stats.samples;
  report.stack_sources = stack_source_report(recording);
  add_losses(recording, model, report);
  report.profile = summary;
  for (const auto& [library, share] : summary.unnamed_share_by_library)
    report.unnamed_share += share;
  // dpkg-query is asked here: only when there is something to say.
  if (!summary.unnamed_share_by_library.empty())
    report.debug_info_hint = debug_info_hint(summary.unnamed_library_paths);
  report.unwinding = unwind_cost(recording);
  report.runtimes = recording.stats.runtimes;
  report.refused_files = untrusted_file_refusals();
  report.refused_opens = untrusted_file_refusal_count();
  report.copied_file_bytes = untrusted_copy_bytes();
  report.processes_by_cpu_time = processes_by_cpu_time(model);
  report.contexts_by_cpu_time = contexts_by_cpu_time(model);
  report.wakers = recording.record_wakers || recording.stats.wakings.wakings > 0;
  report.wakings = recording.stats.wakings;
  return report;
}

std::string wakings_text(const WakingStats& w) {
  auto n = [](uint64_t v) { return std::to_string(v); };
  return n(w.wakings) + " wakeups of profiled threads; waker stacks " + n(w.stacks_taken) +
         " taken, " + n(w.stacks_reused) +
         " reused (same waker and thread within a sampling interval), " + n(w.user_stacks_skipped) +
         " kernel-only (waker not profiled), " + n(w.stacks_missing) + " lost";
}

std::string contexts_text(const std::vector<ContextCpuTime>& contexts) {
  constexpr size_t kShown = 8;
  std::string text;
  for (size_t i = 0; i < contexts.size() && i < kShown; ++i) {
    char figures[64];
    snprintf(figures, sizeof figures, " %.2f s (%llu process%s)",
             static_cast<double>(contexts[i].cpu_ns) / 1e9,
             static_cast<unsigned long long>(contexts[i].processes),
             contexts[i].processes == 1 ? "" : "es");
    text += (i ? ", " : "") + contexts[i].label + figures;
  }
  if (contexts.size() > kShown) text += ", ... (" + std::to_string(contexts.size()) + " in all)";
  return text;
}

std::string top_wakers_text(const ProcessWakers& wakers) {
  std::string text;
  for (const WakerTotal& t : wakers.top) {
    char figures[96];
    snprintf(figures, sizeof figures, " %.1f ms in %llu wakeups", t.waited_ms,
             static_cast<unsigned long long>(t.wakings));
    text += (text.empty() ? "" : ", ") + t.waker + figures;
  }
  return text;
}

std::vector<ReportEntry> profile_extra_entries(const RunReport& report) {
  std::vector<ReportEntry> entries;
  entries.push_back({"Call graph", "string", std::string(call_graph_name(report.call_graph))});
  entries.push_back({"Sampling event", "string", report.sampling_event});
  entries.push_back({"Samples", "integer", report.samples});
  entries.push_back({"Lost events", "integer", report.lost_events});
  if (report.late_events) entries.push_back({"Late events", "integer", report.late_events});
  if (report.processes_not_followed)
    entries.push_back({"Processes not followed (--max-processes " +
                           std::to_string(report.max_tracked_processes) + " reached)",
                       "integer", report.processes_not_followed});
  const StackCompleteness& stacks = report.profile.user_stacks;
  if (stacks.total > 0) entries.push_back({"User stacks complete", "percentage", stacks.share()});
  for (const auto& [label, text] : report.stack_sources) entries.push_back({label, "string", text});
  if (report.lost_ring_buffer_events) {
    std::string per_cpu;
    for (const CpuLosses& cpu : report.lost_by_cpu)
      per_cpu += (per_cpu.empty() ? "CPU " : ", CPU ") + std::to_string(cpu.cpu) + ": " +
                 std::to_string(cpu.count);
    entries.push_back({"Lost events per CPU", "string", per_cpu});
    std::string by_process;
    for (size_t i = 0; i < report.lost_by_process.size() && i < 10; ++i)
      by_process += (i ? ", " : "") + report.lost_by_process[i].process + ": " +
                    std::to_string(report.lost_by_process[i].count);
    if (report.lost_by_process.size() > 10) by_process += ", ...";
    entries.push_back({"Lost events by process", "string", by_process});
  }
  for (const auto& [runtime, stats] : report.runtimes) add_runtime_entries(runtime, stats, entries);
  if (!report.refused_files.empty()) {
    std::string text;
    for (const std::string& refusal : report.refused_files)
      text += (text.empty() ? "" : "; ") + refusal;
    entries.push_back({"Files refused", "string", text});
    entries.push_back({"Opens of files refused", "integer", report.refused_opens});
  }
  if (report.copied_file_bytes)
    entries.push_back(
        {"Bytes of other users' files read from copies", "integer", report.copied_file_bytes});
  if (!report.contexts_by_cpu_time.empty())
    entries.push_back(
        {"CPU time by container or service", "string", contexts_text(report.contexts_by_cpu_time)});
  if (report.wakers) entries.push_back({"Wakeups", "string", wakings_text(report.wakings)});
  for (const ProcessWakers& wakers : report.profile.top_wakers)
    entries.push_back({"Top wakers of " + wakers.process, "string", top_wakers_text(wakers)});
  if (!report.profile.unnamed_share_by_library.empty())
    entries.push_back({"On-CPU samples in code without a symbol", "string",
                       shares_text(report.profile.unnamed_share_by_library, 10)});
  const auto& incomplete = report.profile.incomplete_user_stacks_by_process;
  if (!incomplete.empty()) {
    std::string text;
    for (size_t i = 0; i < incomplete.size() && i < 10; ++i) {
      const auto& [process, of_process] = incomplete[i];
      char share[96];
      snprintf(share, sizeof share, ": %.1f%% of %.0f", 100.0 * (1.0 - of_process.share()),
               of_process.total);
      text += (i ? ", " : "") + process + share;
    }
    entries.push_back({"Truncated user stacks by process", "string", text});
  }
  if (!report.profile.truncated_user_stacks_at.empty())
    entries.push_back({"Where truncated user stacks end", "string",
                       shares_text(report.profile.truncated_user_stacks_at, kTruncatedAtKept)});
  return entries;
}

}  // namespace bpfprof
