#include "userspace/cli/summary.h"

#include <cstdarg>
#include <string>
#include <vector>

#include "bpf/events.h"
#include "symbols/util/text.h"

namespace bpfprof {

namespace {

using Lines = std::vector<std::string>;

// One "bpfprof: ..." line, printf-style.
__attribute__((format(printf, 2, 3))) void add(Lines& lines, const char* format, ...) {
  char text[2048];
  va_list args;
  va_start(args, format);
  vsnprintf(text, sizeof text, format, args);
  va_end(args);
  lines.push_back(std::string("bpfprof: ") + text);
}

constexpr size_t kTopProcesses = 5;

// Beyond this share of complete stacks a frame-pointer recording is fine as it is.
constexpr double kFramePointerAdviceBelow = 0.9;

// Below this share of complete stacks the brief summary says so, with the worst processes.
constexpr double kIncompleteNoteBelow = 0.95;
// From this share of on-CPU samples in code without a name the brief summary says where.
constexpr double kUnnamedNoteFrom = 0.01;
constexpr size_t kBriefTopFunctions = 5;
constexpr size_t kBriefNameChars = 60;

void add_totals(const RunReport& r, Lines& lines) {
  add(lines,
      "%llu samples (%s, %u Hz) from %zu processes and %zu threads; %llu events "
      "lost",
      static_cast<unsigned long long>(r.samples), r.sampling_event.c_str(), r.frequency_hz,
      r.profile.processes, r.profile.threads, static_cast<unsigned long long>(r.lost_events));
}

void add_not_followed(const RunReport& r, Lines& lines) {
  if (r.processes_not_followed)
    add(lines,
        "%llu processes started while %u were followed went unsampled, with what "
        "they started (raise --max-processes)",
        static_cast<unsigned long long>(r.processes_not_followed), r.max_tracked_processes);
}

void add_unwind_cost(const UnwindCost& cost, Lines& lines) {
  add(lines,
      "user stacks copied and unwound in userspace: %llu of %llu taken (samples, "
      "switch-outs, wakers); per copy: unwinding %.1f us (median), %.0f bytes of stack and %.0f of "
      "event "
      "(mean); unwinding %.1f ms in all",
      static_cast<unsigned long long>(cost.copied_stacks),
      static_cast<unsigned long long>(cost.user_stacks), cost.median_us, cost.stack_bytes_per_copy,
      cost.event_bytes_per_copy, cost.total_ms);
  if (!cost.raised_stack_copies.empty()) {
    std::string raised;
    for (const auto& [pid, bytes] : cost.raised_stack_copies)
      raised +=
          (raised.empty() ? "" : ", ") + std::to_string(pid.value) + ": " + std::to_string(bytes);
    add(lines, "stacks cut at the copy's end got larger copies (pid: bytes): %s", raised.c_str());
  }
  if (cost.often_cut_at_copy_end)
    add(lines, "%.1f%% of the copied stacks were cut where their copy ended%s",
        100.0 * cost.cut_at_copy_end_share,
        cost.fixed_stack_copy_size
            ? "; a larger --call-graph dwarf,SIZE (up to 65528) reaches further"
            : " (before their process got a larger copy)");
}

// How many user stacks reach a thread root, as the profile shows them, where they do not,
// and what to do about it.
void add_stack_completeness(const RunReport& r, Lines& lines) {
  const StackCompleteness& stacks = r.profile.user_stacks;
  if (stacks.total <= 0) return;
  std::string worst;
  const auto& incomplete = r.profile.incomplete_user_stacks_by_process;
  for (size_t i = 0; i < incomplete.size() && i < 3; ++i) {
    char text[64];
    snprintf(text, sizeof text, " %.1f%%", 100.0 * incomplete[i].second.share());
    worst += (i ? ", " : "; least complete: ") + incomplete[i].first + text;
  }
  const auto& ends = r.profile.truncated_user_stacks_at;
  const std::string cut_at = ends.empty() ? "" : "; cut at: " + shares_text(ends, 3);
  add(lines,
      "user stacks complete: %.1f%% of %.0f on-CPU samples reach a thread root (the "
      "rest begin with [truncated])%s%s",
      100.0 * stacks.share(), stacks.total, worst.c_str(), cut_at.c_str());
  if (r.call_graph == CallGraph::kFramePointers && stacks.share() < kFramePointerAdviceBelow)
    add(lines,
        "most code here has no frame pointers, so frame-pointer stacks stop early; "
        "the default --call-graph dwarf unwinds without them");
}

// For DWARF stacks, what unwinding cost, and where stacks were unwound.
void add_unwinding(const RunReport& r, Lines& lines) {
  if (r.unwinding) add_unwind_cost(*r.unwinding, lines);
  for (const auto& [label, text] : r.stack_sources)
    add(lines, "%s: %s", label.c_str(), text.c_str());
}

// Where events were lost: per CPU, and the top three processes.
void add_losses(const RunReport& r, Lines& lines) {
  if (r.late_events)
    add(lines,
        "%llu events arrived after the reorder window and were applied out of "
        "order (the recorder was starved of CPU)",
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
  add(lines,
      "%llu events lost (ring buffer full; try a larger --buffer-size or a lower "
      "-F): %s; in %s",
      static_cast<unsigned long long>(r.lost_ring_buffer_events), per_cpu.c_str(), top.c_str());
}

void add_unnamed(const RunReport& r, Lines& lines) {
  const auto& shares = r.profile.unnamed_share_by_library;
  if (shares.empty()) return;
  std::string where;
  for (size_t i = 0; i < shares.size() && i < 3; ++i) {
    char text[64];
    snprintf(text, sizeof text, " %.1f%%", 100.0 * shares[i].second);
    where += (i ? ", " : "") + shares[i].first + text;
  }
  add(lines,
      "%.1f%% of on-CPU samples are in code without a symbol (no debug "
      "information?): %s",
      100.0 * r.unnamed_share, where.c_str());
  if (!r.debug_info_hint.empty()) add(lines, "  %s", r.debug_info_hint.c_str());
}

unsigned long long count(uint64_t n) { return static_cast<unsigned long long>(n); }

std::string format_share(double share) {
  char text[16];
  snprintf(text, sizeof text, "%.1f%%", 100.0 * share);
  return text;
}

// Interpreters whose frames were not read, and processes past the reading budget.
void add_runtime_problems(const RunReport& r, Lines& lines) {
  for (const auto& [runtime, p] : r.runtimes) {
    for (const auto& [file, reason] : p.not_read)
      add(lines, "%s (%s)", reason.c_str(), file.c_str());
    if (p.read_budget_used_up)
      add(lines,
          "%s: code-object budget used up in %llu process(es): their frames not named before "
          "are \"[unknown %s code: read budget used up]\"",
          lowercase(runtime_name(runtime)).c_str(), count(p.read_budget_used_up),
          std::string(runtime_name(runtime)).c_str());
  }
}

// Go's goroutine labels: a set at the root of a stack, not frames of an interpreter.
void add_label_figures(const RuntimeStats& p, Lines& lines) {
  add(lines,
      "go labels: %llu process(es) labelling goroutines; a label set on %.1f%% of the %llu "
      "stacks they were read for (%.0f bytes per stack); %llu unreadable, %llu with more than "
      "%u labels (a slice's first %u kept, a map's not read)",
      count(p.interpreters), 100.0 * static_cast<double>(p.merged) / static_cast<double>(p.stacks),
      count(p.stacks), static_cast<double>(p.event_bytes) / static_cast<double>(p.stacks),
      count(p.unreadable), count(p.at_limit), p.max_frames, p.max_frames);
}

// How many stacks of interpreters got their runtime's frames, and why the others did not.
void add_runtime_figures(RuntimeKind runtime, const RuntimeStats& p, Lines& lines) {
  if (!p.stacks) return;
  if (runtime == RuntimeKind::kGoLabels) return add_label_figures(p, lines);
  const std::string name(runtime_name(runtime));
  const std::string lower = lowercase(name);
  add(lines,
      "%s: %llu interpreter(s); %s frames in %.1f%% of their %llu stacks "
      "(%.0f bytes per stack); %llu code objects read and named in %.1f ms",
      lower.c_str(), count(p.interpreters), name.c_str(),
      100.0 * static_cast<double>(p.merged) / static_cast<double>(p.stacks), count(p.stacks),
      static_cast<double>(p.event_bytes) / static_cast<double>(p.stacks),
      count(p.code_objects_read), static_cast<double>(p.code_read_ns) / 1e6);
  if (p.no_thread_state || p.unreadable || p.at_limit || p.mismatched || p.unnamed_frames)
    add(lines,
        "%s stacks without or with fewer frames: %llu without a thread state, "
        "%llu cut (an unreadable frame, a chain read mid-switch), %llu deeper than %u frames, %llu "
        "not matching the "
        "native interpreter frames; %llu frames unnamed",
        lower.c_str(), count(p.no_thread_state), count(p.unreadable), count(p.at_limit),
        p.max_frames, count(p.mismatched), count(p.unnamed_frames));
}

// The processes that used the most CPU time (the kernel's accounting, summed over threads).
void add_top_processes(const RunReport& r, Lines& lines) {
  const auto& processes = r.processes_by_cpu_time;
  if (processes.empty()) return;
  std::string line = "top processes by CPU time:";
  for (size_t i = 0; i < processes.size() && i < kTopProcesses; ++i) {
    char entry[320];
    snprintf(entry, sizeof entry, "%s %s (%d) %.2f s", i ? "," : "", processes[i].name.c_str(),
             processes[i].pid.value, static_cast<double>(processes[i].cpu_ns) / 1e9);
    line += entry;
  }
  if (processes.size() > kTopProcesses)
    line += ", ... (" + std::to_string(processes.size()) + " in all)";
  add(lines, "%s", line.c_str());
  if (!r.contexts_by_cpu_time.empty())
    add(lines, "CPU time by container or service: %s",
        contexts_text(r.contexts_by_cpu_time).c_str());
}

// --embed-sources: what the profile carries, and what it does not.
void add_embedded_sources(const RunReport& r, Lines& lines) {
  const std::optional<EmbeddedSources>& e = r.profile.embedded_sources;
  if (!e) return;
  const EmbedLimits limits;
  add(lines,
      "embedded %zu source files (%llu KB) in the profile; %zu sampled files not "
      "readable here (or over %llu MiB), %zu left out (over %llu MiB in all)",
      e->files, static_cast<unsigned long long>((e->bytes + 1023) / 1024), e->unreadable,
      static_cast<unsigned long long>(limits.max_file_bytes >> 20), e->left_out,
      static_cast<unsigned long long>(limits.max_total_bytes >> 20));
}

// One line per function (full), or the first few on one line (brief); nothing, not even a
// heading, when no on-CPU sample was named.
void add_top_functions(const RunReport& r, SummaryDetail detail, Lines& lines) {
  const auto& top = r.profile.top_self_functions;
  if (top.empty()) return;
  if (detail == SummaryDetail::kFull) {
    add(lines, "top functions by on-CPU samples (self):");
    for (const auto& [name, share] : top) {
      char text[16];
      snprintf(text, sizeof text, "  %5.1f%%  ", 100.0 * share);
      lines.push_back(text + name);
    }
    return;
  }
  std::string line;
  // The first always; the others while they hold 1% or more.
  for (size_t i = 0; i < top.size() && i < kBriefTopFunctions && (i == 0 || top[i].second >= 0.01);
       ++i) {
    std::string name = top[i].first;
    if (name.size() > kBriefNameChars) name = name.substr(0, kBriefNameChars - 3) + "...";
    line += (i ? ", " : "") + name + " " + format_share(top[i].second);
  }
  add(lines, "top functions (self time on CPU): %s", line.c_str());
}

// Who woke the threads: the waker stacks' cost, and the top wakers of each process.
void add_wakers(const RunReport& r, Lines& lines) {
  if (!r.wakers) return;
  add(lines, "%s", wakings_text(r.wakings).c_str());
  for (const ProcessWakers& wakers : r.profile.top_wakers)
    add(lines, "top wakers of %s: %s", wakers.process.c_str(), top_wakers_text(wakers).c_str());
}

// record --memory: the processes' peak resident memory, largest first.
void add_memory_peaks(const RunReport& r, size_t shown, Lines& lines) {
  const auto& peaks = r.profile.memory_peaks;
  if (peaks.empty()) return;
  std::string text;
  for (size_t i = 0; i < peaks.size() && i < shown; ++i) {
    char one[160];
    snprintf(one, sizeof one, "%s%s %.1f MB at %.2f s", i ? ", " : "", peaks[i].process.c_str(),
             static_cast<double>(peaks[i].bytes) / 1e6, peaks[i].at_ms / 1e3);
    text += one;
  }
  if (peaks.size() > shown) text += ", " + std::to_string(peaks.size() - shown) + " more";
  add(lines, "peak resident memory: %s", text.c_str());
}

// "12.3 MB"; from 10 GB on in GB, from 10 TB on in TB (an address space reserved sparsely).
std::string size_text(uint64_t bytes) {
  const double b = static_cast<double>(bytes);
  char text[32];
  if (b >= 1e13)
    snprintf(text, sizeof text, "%.1f TB", b / 1e12);
  else if (b >= 1e10)
    snprintf(text, sizeof text, "%.1f GB", b / 1e9);
  else
    snprintf(text, sizeof text, "%.1f MB", b / 1e6);
  return text;
}

// " 12.3 MB (45%)" for each of the stacks, after "; most at ".
std::string top_memory_stacks(const MemoryGrowth& growth) {
  std::string text;
  for (size_t i = 0; i < growth.top_stacks.size(); ++i) {
    const auto& [stack, bytes] = growth.top_stacks[i];
    char one[64];
    snprintf(one, sizeof one, " %s (%.0f%%)", size_text(bytes).c_str(),
             100.0 * static_cast<double>(bytes) / static_cast<double>(growth.bytes));
    text.append(i ? ", " : "; most at ").append(stack).append(one);
  }
  return text;
}

// record --memory: how much the address spaces grew and shrank (sampled system calls), and
// where they grew most.
void add_address_space(const RunReport& r, Lines& lines) {
  const AddressSpaceGrowth& a = r.profile.address_space;
  if (!a.calls) return;
  std::string calls = std::to_string(a.calls) + " calls sampled";
  if (r.profile.address_space_calls_without_stack)
    calls +=
        ", " + std::to_string(r.profile.address_space_calls_without_stack) + " without a stack";
  add(lines,
      "address space (mmap, munmap, brk, mremap; one call sampled per %d KiB changed): grew %s, "
      "shrank %s (%s)%s",
      BPFPROF_ADDRESS_SPACE_PERIOD >> 10, size_text(a.grown.bytes).c_str(),
      size_text(a.shrunk_bytes).c_str(), calls.c_str(), top_memory_stacks(a.grown).c_str());
}

// record --memory: the memory brought in (sampled page faults), and where most of it was;
// with --allocations, the blocks allocated and those still held at the end.
void add_memory_growth(const RunReport& r, Lines& lines) {
  const MemoryGrowth& growth = r.profile.memory_growth;
  if (r.profile.allocation_period) {
    const MemoryGrowth& held = r.profile.memory_held;
    std::string calls = std::to_string(r.profile.allocator_calls) + " calls sampled";
    if (r.profile.allocator_calls_without_stack)
      calls += ", " + std::to_string(r.profile.allocator_calls_without_stack) +
               " without a stack (a sample interrupted the walk)";
    add(lines,
        "allocated (malloc, calloc, realloc, memalign; one call sampled per %llu KiB): %.1f MB "
        "(%s)%s",
        static_cast<unsigned long long>(r.profile.allocation_period >> 10),
        static_cast<double>(growth.bytes) / 1e6, calls.c_str(), top_memory_stacks(growth).c_str());
    add(lines, "still held at the end (allocated, not freed): %.1f MB%s",
        static_cast<double>(held.bytes) / 1e6, top_memory_stacks(held).c_str());
    return;
  }
  if (!growth.bytes) return;
  add(lines, "memory brought in (page faults, one in 64 sampled): %.1f MB%s",
      static_cast<double>(growth.bytes) / 1e6, top_memory_stacks(growth).c_str());
}

// Files of other users that were not read, and why: said even when nothing else is.
void add_refused_files(const RunReport& r, size_t shown, Lines& lines) {
  for (size_t i = 0; i < r.refused_files.size() && i < shown; ++i)
    add(lines, "%s", r.refused_files[i].c_str());
  if (r.refused_files.size() > shown)
    add(lines,
        "%zu more files of other users refused (-v, or the profile's meta.extra, lists them)",
        r.refused_files.size() - shown);
}

// What went wrong or was left out, each with what to do about it; nothing when all is well.
Lines problems(const RunReport& r) {
  Lines lines;
  add_not_followed(r, lines);
  add_losses(r, lines);
  if (r.profile.user_stacks.total > 0 && r.profile.user_stacks.share() < kIncompleteNoteBelow)
    add_stack_completeness(r, lines);
  if (r.unnamed_share >= kUnnamedNoteFrom) add_unnamed(r, lines);
  add_runtime_problems(r, lines);
  add_refused_files(r, 1, lines);
  add_embedded_sources(r, lines);
  if (lines.size() > kBriefProblemLines) {
    const size_t more = lines.size() - (kBriefProblemLines - 1);
    lines.resize(kBriefProblemLines - 1);
    add(lines, "%zu more notes: -v prints them (the profile's meta.extra has every figure)", more);
  }
  return lines;
}

Lines full_summary(const RunReport& r) {
  Lines lines;
  add_totals(r, lines);
  add_not_followed(r, lines);
  add_stack_completeness(r, lines);
  add_unwinding(r, lines);
  add_losses(r, lines);
  add_unnamed(r, lines);
  add_runtime_problems(r, lines);
  for (const auto& [runtime, stats] : r.runtimes) add_runtime_figures(runtime, stats, lines);
  add_refused_files(r, 10, lines);
  add_top_processes(r, lines);
  add_top_functions(r, SummaryDetail::kFull, lines);
  add_embedded_sources(r, lines);
  add_wakers(r, lines);
  add_memory_peaks(r, 10, lines);
  add_memory_growth(r, lines);
  add_address_space(r, lines);
  return lines;
}

}  // namespace

void print_run_summary(const RunReport& report, SummaryDetail detail, FILE* out) {
  Lines lines;
  if (detail == SummaryDetail::kFull) {
    lines = full_summary(report);
  } else {
    add_totals(report, lines);
    for (std::string& line : problems(report)) lines.push_back(std::move(line));
    add_top_functions(report, SummaryDetail::kBrief, lines);
    add_memory_peaks(report, 3, lines);
    add_memory_growth(report, lines);
    add_address_space(report, lines);
  }
  for (const std::string& line : lines) fprintf(out, "%s\n", line.c_str());
}

}  // namespace bpfprof
