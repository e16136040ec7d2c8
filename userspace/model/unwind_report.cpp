#include "userspace/model/unwind_report.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "bpf/events.h"
#include "bpf/unwind_maps.h"
#include "symbols/dwarf/unwind_table.h"

namespace bpfprof {

namespace {

std::string format(const char* pattern, auto... values) {
  char text[256];
  snprintf(text, sizeof text, pattern, values...);
  return text;
}

// 8000000 -> "8,000,000".
std::string grouped(uint64_t value) {
  const std::string digits = std::to_string(value);
  std::string text;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0) text += ',';
    text += digits[i];
  }
  return text;
}

// "1 (past 8,000,000 rows): /tmp/a.so", or with both bounds "2 (1 past 8,000,000 rows, 1 past
// 5 s of building): /tmp/a.so, /tmp/b.so".
std::string skipped_tables(const KernelUnwindStats& k) {
  const uint64_t rows = k.tables_past_row_limit;
  const uint64_t time = k.tables_past_time_limit;
  const std::string row_bound = "past " + grouped(kMaxUnwindTableRows) + " rows";
  const std::string time_bound = format(
      "past %.0f s of building", std::chrono::duration<double>(kUnwindTableTimeLimit).count());
  std::string text = std::to_string(rows + time) + " (";
  if (rows && time)
    text += std::to_string(rows) + " " + row_bound + ", " + std::to_string(time) + " " + time_bound;
  else
    text += rows ? row_bound : time_bound;
  text += ")";
  for (size_t i = 0; i < k.tables_skipped_files.size(); ++i)
    text += (i ? ", " : ": ") + k.tables_skipped_files[i];
  if (rows + time > k.tables_skipped_files.size()) text += ", ...";
  return text + "; their samples fall back to stack copies";
}

std::string fallback_reasons(const std::vector<uint64_t>& by_reason) {
  static const char* const kNames[BPFPROF_FALLBACK_REASONS] = {
      "process not known yet", "pc in no known mapping", "table not loaded yet",
      "no rule for the pc",    "stack page not present", nullptr /* cut, not a fallback */,
      "frame going nowhere",   "frame pointer needed"};
  std::string text;
  for (size_t i = 0; i < by_reason.size() && i < BPFPROF_FALLBACK_REASONS; ++i)
    if (by_reason[i] && kNames[i])
      text +=
          (text.empty() ? "" : ", ") + std::string(kNames[i]) + " " + std::to_string(by_reason[i]);
  return text.empty() ? "none" : text;
}

// "pid 812 9,684, pid 790 12, pid 14 3 (of 5 processes)": the processes whose walks fell
// back most.
std::string copies_by_process(const std::unordered_map<Pid, uint64_t>& copies) {
  std::vector<std::pair<Pid, uint64_t>> most(copies.begin(), copies.end());
  constexpr size_t kNamed = 3;
  const size_t named = std::min(kNamed, most.size());
  std::partial_sort(most.begin(), most.begin() + static_cast<ptrdiff_t>(named), most.end(),
                    [](const auto& a, const auto& b) { return a.second > b.second; });
  std::string text;
  for (size_t i = 0; i < named; ++i) {
    text.append(i ? ", pid " : "pid ").append(std::to_string(most[i].first.value));
    text.append(" ").append(grouped(most[i].second));
  }
  return text.append(format(" (of %zu processes)", most.size()));
}

void describe_tables(const KernelUnwindStats& k,
                     std::vector<std::pair<std::string, std::string>>& out) {
  out.emplace_back(
      "Unwind tables",
      format("%llu built, %llu from cache, %llu unreadable (%.0f ms of CPU); %llu of %u rows "
             "in use (room for %u at most), %llu tables evicted for space; %.1f MB of BPF "
             "maps; %llu distinct rules",
             static_cast<unsigned long long>(k.tables_built),
             static_cast<unsigned long long>(k.tables_from_cache),
             static_cast<unsigned long long>(k.tables_failed), k.table_ms,
             static_cast<unsigned long long>(k.rows_loaded), k.row_capacity, k.row_bound,
             static_cast<unsigned long long>(k.tables_evicted),
             static_cast<double>(k.map_bytes) / 1e6,
             static_cast<unsigned long long>(k.rules_loaded)) +
          (k.tables_preferred ? format("; %llu moved ahead of the queue for samples "
                                       "that fell back without them",
                                       static_cast<unsigned long long>(k.tables_preferred))
                              : std::string()) +
          (k.tables_unbuilt ? format("; %llu not in the cache left unbuilt: no stack needed them",
                                     static_cast<unsigned long long>(k.tables_unbuilt))
                            : std::string()));
  if (k.tables_past_row_limit || k.tables_past_time_limit)
    out.emplace_back("Unwind tables skipped", skipped_tables(k));
  if (k.files_over_capacity || k.processes_over_mapping_limit || k.processes_not_stored)
    out.emplace_back("Unwind bounds hit",
                     format("%llu tables did not fit in the row array, %llu processes had more "
                            "than %d executable mappings, %llu processes did not fit in the map",
                            static_cast<unsigned long long>(k.files_over_capacity),
                            static_cast<unsigned long long>(k.processes_over_mapping_limit),
                            BPFPROF_MAX_PROCESS_MAPPINGS,
                            static_cast<unsigned long long>(k.processes_not_stored)));
  if (k.entries_overwritten_by_kernel)
    out.emplace_back("Process entries rewritten",
                     format("%llu stored over by the kernel's scan of a young image's mappings "
                            "as they were written, written again",
                            static_cast<unsigned long long>(k.entries_overwritten_by_kernel)));
  out.emplace_back("Kernel walks that fell back", fallback_reasons(k.fallbacks_by_reason));
  const uint64_t cut = k.fallbacks_by_reason.size() > BPFPROF_WALK_CUT_AT_DEPTH
                           ? k.fallbacks_by_reason[BPFPROF_WALK_CUT_AT_DEPTH]
                           : 0;
  if (cut)
    out.emplace_back("Kernel walks cut at the depth limit",
                     format("%llu deeper than %d frames (their innermost frames kept, rooted "
                            "at [truncated])",
                            static_cast<unsigned long long>(cut), BPFPROF_MAX_UNWOUND_FRAMES));
}

}  // namespace

std::vector<std::pair<std::string, std::string>> stack_source_report(const Recording& recording) {
  std::vector<std::pair<std::string, std::string>> out;
  const RecordingStats& s = recording.stats;
  if (s.samples)
    out.emplace_back("Ring-buffer traffic",
                     format("%.0f bytes per sample", static_cast<double>(s.sample_event_bytes) /
                                                         static_cast<double>(s.samples)));
  // A replay has the split (from the events) but not the tables (the recorder's own state).
  if (recording.call_graph != CallGraph::kDwarf) return out;
  auto split = [&](const char* label, const StackSources& stacks) {
    const uint64_t all = stacks.kernel + stacks.copied;
    if (!all) return;
    std::string text = format("%.1f%% (%llu; %llu by fallback: stack copy unwound in userspace)",
                              100.0 * static_cast<double>(stacks.kernel) / static_cast<double>(all),
                              static_cast<unsigned long long>(stacks.kernel),
                              static_cast<unsigned long long>(stacks.copied));
    // Tables of the files mapped at the start load in the first second (-a, -p).
    if (const uint64_t settled = stacks.kernel_settled + stacks.copied_settled)
      text +=
          format("; %.1f%% after the first second",
                 100.0 * static_cast<double>(stacks.kernel_settled) / static_cast<double>(settled));
    out.emplace_back(label, text);
  };
  split("User stacks unwound in the kernel", s.on_cpu_stacks);
  split("Off-CPU user stacks unwound in the kernel", s.off_cpu_stacks);
  if (!s.stack_copies_by_process.empty())
    out.emplace_back("Stack copies by process", copies_by_process(s.stack_copies_by_process));
  if (s.kernel_unwind) describe_tables(*s.kernel_unwind, out);
  return out;
}

}  // namespace bpfprof
