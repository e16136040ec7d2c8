#include "userspace/cli/summary.h"

#include <string>

#include "bpf/events.h"

namespace bpfprof {

namespace {

constexpr size_t kTopProcesses = 5;

// Beyond this share of complete stacks a frame-pointer recording is fine as it is.
constexpr double kFramePointerAdviceBelow = 0.9;

void print_totals(const RunReport& r, FILE* out) {
  fprintf(out,
          "bpfprof: %llu samples (%s, %u Hz) from %zu processes and %zu threads; %llu events "
          "lost\n",
          static_cast<unsigned long long>(r.samples), r.sampling_event.c_str(), r.frequency_hz,
          r.profile.processes, r.profile.threads, static_cast<unsigned long long>(r.lost_events));
  if (r.processes_not_followed)
    fprintf(out,
            "bpfprof: %llu processes started while %u were followed went unsampled, with what "
            "they started (raise --max-processes)\n",
            static_cast<unsigned long long>(r.processes_not_followed), r.max_tracked_processes);
}

void print_unwind_cost(const UnwindCost& cost, FILE* out) {
  fprintf(out,
          "bpfprof: unwinding %.1f us per stack (median), %.1f ms in all; %.0f bytes of stack "
          "copied per sample (%.0f bytes per event)\n",
          cost.median_us, cost.total_ms, cost.copied_bytes_per_sample, cost.event_bytes_per_sample);
  if (!cost.raised_stack_copies.empty()) {
    std::string raised;
    for (const auto& [pid, bytes] : cost.raised_stack_copies)
      raised +=
          (raised.empty() ? "" : ", ") + std::to_string(pid.value) + ": " + std::to_string(bytes);
    fprintf(out, "bpfprof: stacks cut at the copy's end got larger copies (pid: bytes): %s\n",
            raised.c_str());
  }
  if (cost.often_cut_at_copy_end)
    fprintf(out, "bpfprof: %.1f%% of the stacks were cut where their copy ended%s\n",
            100.0 * cost.cut_at_copy_end_share,
            cost.fixed_stack_copy_size
                ? "; a larger --call-graph dwarf,SIZE (up to 65528) reaches further"
                : " (before their process got a larger copy)");
}

// How many user stacks reach a thread root, as the profile shows them, where they do not,
// and what to do about it; for DWARF stacks, what unwinding cost.
void print_stack_completeness(const RunReport& r, FILE* out) {
  const StackCompleteness& stacks = r.profile.user_stacks;
  if (stacks.total <= 0) return;
  std::string worst;
  const auto& incomplete = r.profile.incomplete_user_stacks_by_process;
  for (size_t i = 0; i < incomplete.size() && i < 3; ++i) {
    char text[64];
    snprintf(text, sizeof text, " %.1f%%", 100.0 * incomplete[i].second.share());
    worst += (i ? ", " : "; least complete: ") + incomplete[i].first + text;
  }
  fprintf(out,
          "bpfprof: user stacks complete: %.1f%% of %.0f on-CPU samples reach a thread root (the "
          "rest begin with [truncated])%s\n",
          100.0 * stacks.share(), stacks.total, worst.c_str());
  if (r.call_graph == "fp" && stacks.share() < kFramePointerAdviceBelow)
    fprintf(out,
            "bpfprof: most code here has no frame pointers, so frame-pointer stacks stop early; "
            "the default --call-graph dwarf unwinds without them\n");
  if (r.unwinding) print_unwind_cost(*r.unwinding, out);
  for (const auto& [label, text] : r.stack_sources)
    fprintf(out, "bpfprof: %s: %s\n", label.c_str(), text.c_str());
}

// Where events were lost: per CPU, and the top three processes.
void print_losses(const RunReport& r, FILE* out) {
  if (r.late_events)
    fprintf(out,
            "bpfprof: %llu events arrived after the reorder window and were applied out of "
            "order (the recorder was starved of CPU)\n",
            static_cast<unsigned long long>(r.late_events));
  if (!r.lost_ring_buffer_events) return;
  std::string per_cpu;
  for (const CpuLosses& cpu : r.lost_by_cpu)
    per_cpu += (per_cpu.empty() ? "CPU " : ", CPU ") + std::to_string(cpu.cpu) + " " +
               std::to_string(cpu.count);
  std::string top;
  for (size_t i = 0; i < r.lost_by_process.size() && i < 3; ++i)
    top += (i ? ", " : "") + r.lost_by_process[i].process + " " +
           std::to_string(r.lost_by_process[i].count);
  fprintf(out,
          "bpfprof: %llu events lost (ring buffer full; try a larger --buffer-size or a lower "
          "-F): %s; in %s\n",
          static_cast<unsigned long long>(r.lost_ring_buffer_events), per_cpu.c_str(), top.c_str());
}

void print_unnamed(const RunReport& r, FILE* out) {
  const auto& shares = r.profile.unnamed_share_by_library;
  if (shares.empty()) return;
  std::string where;
  for (size_t i = 0; i < shares.size() && i < 3; ++i) {
    char text[64];
    snprintf(text, sizeof text, " %.1f%%", 100.0 * shares[i].second);
    where += (i ? ", " : "") + shares[i].first + text;
  }
  fprintf(out,
          "bpfprof: %.1f%% of on-CPU samples are in code without a symbol (no debug "
          "information?): %s\n",
          100.0 * r.unnamed_share, where.c_str());
  if (!r.debug_info_hint.empty()) fprintf(out, "bpfprof:   %s\n", r.debug_info_hint.c_str());
}

// How many stacks of interpreters got their Python frames, and why the others did not.
void print_python(const PythonStats& p, FILE* out) {
  for (const auto& [file, reason] : p.not_read)
    fprintf(out, "bpfprof: %s (%s)\n", reason.c_str(), file.c_str());
  if (!p.stacks) return;
  auto count = [](uint64_t n) { return static_cast<unsigned long long>(n); };
  fprintf(out,
          "bpfprof: python: %llu interpreter(s); Python frames in %.1f%% of their %llu stacks "
          "(%.0f bytes per stack); %llu code objects read and named in %.1f ms\n",
          count(p.interpreters),
          100.0 * static_cast<double>(p.merged) / static_cast<double>(p.stacks), count(p.stacks),
          static_cast<double>(p.event_bytes) / static_cast<double>(p.stacks),
          count(p.code_objects_read), static_cast<double>(p.code_read_ns) / 1e6);
  if (p.no_thread_state || p.unreadable || p.at_limit || p.mismatched || p.unnamed_frames)
    fprintf(out,
            "bpfprof: python stacks without or with fewer frames: %llu without a thread state, "
            "%llu cut by an unreadable frame, %llu deeper than %d frames, %llu not matching the "
            "native interpreter frames; %llu frames unnamed\n",
            count(p.no_thread_state), count(p.unreadable), count(p.at_limit),
            BPFPROF_MAX_PYTHON_FRAMES, count(p.mismatched), count(p.unnamed_frames));
  if (p.read_budget_used_up)
    fprintf(out,
            "bpfprof: python: code-object budget used up in %llu process(es): their frames not "
            "named before are \"[unknown Python code: read budget used up]\"\n",
            count(p.read_budget_used_up));
}

// The processes that used the most CPU time (the kernel's accounting, summed over threads).
void print_top_processes(const RunReport& r, FILE* out) {
  const auto& processes = r.processes_by_cpu_time;
  if (processes.empty()) return;
  std::string line = "bpfprof: top processes by CPU time:";
  for (size_t i = 0; i < processes.size() && i < kTopProcesses; ++i) {
    char entry[320];
    snprintf(entry, sizeof entry, "%s %s (%d) %.2f s", i ? "," : "", processes[i].name.c_str(),
             processes[i].pid.value, static_cast<double>(processes[i].cpu_ns) / 1e9);
    line += entry;
  }
  if (processes.size() > kTopProcesses)
    line += ", ... (" + std::to_string(processes.size()) + " in all)";
  fprintf(out, "%s\n", line.c_str());
}

// --embed-sources: what the profile carries, and what it does not.
void print_embedded_sources(const RunReport& r, FILE* out) {
  const std::optional<EmbeddedSources>& e = r.profile.embedded_sources;
  if (!e) return;
  const EmbedLimits limits;
  fprintf(out,
          "bpfprof: embedded %zu source files (%llu KB) in the profile; %zu sampled files not "
          "readable here (or over %llu MiB), %zu left out (over %llu MiB in all)\n",
          e->files, static_cast<unsigned long long>((e->bytes + 1023) / 1024), e->unreadable,
          static_cast<unsigned long long>(limits.max_file_bytes >> 20), e->left_out,
          static_cast<unsigned long long>(limits.max_total_bytes >> 20));
}

void print_top_functions(const RunReport& r, FILE* out) {
  if (r.profile.top_self_functions.empty()) return;
  fprintf(out, "bpfprof: top functions by on-CPU samples (self):\n");
  for (const auto& [name, share] : r.profile.top_self_functions)
    fprintf(out, "  %5.1f%%  %s\n", 100.0 * share, name.c_str());
}

// Who woke the threads: the waker stacks' cost, and the top wakers of each process.
void print_wakers(const RunReport& r, FILE* out) {
  if (!r.wakers) return;
  fprintf(out, "bpfprof: %s\n", wakings_text(r.wakings).c_str());
  for (const ProcessWakers& wakers : r.profile.top_wakers)
    fprintf(out, "bpfprof: top wakers of %s: %s\n", wakers.process.c_str(),
            top_wakers_text(wakers).c_str());
}

// Files of other users that were not read, and why: said even when nothing else is.
void print_refused_files(const RunReport& r, FILE* out) {
  constexpr size_t kShown = 10;
  for (size_t i = 0; i < r.refused_files.size() && i < kShown; ++i)
    fprintf(out, "bpfprof: %s\n", r.refused_files[i].c_str());
  if (r.refused_files.size() > kShown)
    fprintf(out, "bpfprof: %zu more files refused (the profile's meta.extra lists them)\n",
            r.refused_files.size() - kShown);
}

}  // namespace

void print_run_summary(const RunReport& report, FILE* out) {
  print_totals(report, out);
  print_stack_completeness(report, out);
  print_losses(report, out);
  print_unnamed(report, out);
  print_python(report.python, out);
  print_refused_files(report, out);
  print_top_processes(report, out);
  print_top_functions(report, out);
  print_embedded_sources(report, out);
  print_wakers(report, out);
}

}  // namespace bpfprof
