#include "userspace/output/memory_counters.h"

#include <algorithm>
#include <limits>
#include <map>

#include "userspace/model/clocks.h"
#include "userspace/output/profile_builder.h"

namespace bpfprof {
namespace {

// A profile process: its OS pid, lifetime and a thread to hang its counter on.
struct ProfileProcess {
  Pid pid;
  std::string name;
  double start_ms = 0;
  double end_ms = std::numeric_limits<double>::infinity();
  size_t thread_index = 0;
  bool has_main_thread = false;
};

std::map<std::string, ProfileProcess> profile_processes(const std::vector<ThreadTables>& threads) {
  std::map<std::string, ProfileProcess> processes;
  for (size_t i = 0; i < threads.size(); ++i) {
    const ThreadTables& t = threads[i];
    auto [it, inserted] = processes.try_emplace(t.pid_string);
    ProfileProcess& p = it->second;
    if (inserted) {
      p.pid = t.pid;
      p.name = t.process_name + " (" + std::to_string(t.pid.value) + ")";
      p.start_ms = t.process_start_ms;
      if (t.process_end_ms) p.end_ms = *t.process_end_ms;
      p.thread_index = i;
    }
    if (t.is_main_thread && !p.has_main_thread) {
      p.thread_index = i;
      p.has_main_thread = true;
    }
  }
  return processes;
}

}  // namespace

std::vector<MemoryCounter> build_memory_counters(const Recording& recording,
                                                 const std::vector<ThreadTables>& threads) {
  std::vector<MemoryCounter> counters;
  if (recording.memory.empty()) return counters;
  // A sample at the exec that started a process may be dated a little before its start.
  constexpr double kSlackMs = 1.0;
  for (const auto& [pid_string, process] : profile_processes(threads)) {
    auto series = recording.memory.find(process.pid);
    if (series == recording.memory.end()) continue;
    std::vector<MemorySample> samples = series->second;
    std::stable_sort(samples.begin(), samples.end(),
                     [](const auto& a, const auto& b) { return a.time.value < b.time.value; });
    MemoryCounter counter{pid_string, process.name, process.thread_index, {}, {}, 0, 0};
    int64_t previous = 0;
    for (const MemorySample& s : samples) {
      const double ms = ms_between(recording.start_time, s.time);
      if (ms < process.start_ms - kSlackMs || ms > process.end_ms + kSlackMs) continue;
      const auto bytes = static_cast<int64_t>(s.resident_bytes);
      counter.time_ms.push_back(std::max(ms, 0.0));
      counter.change.push_back(bytes - previous);
      previous = bytes;
      if (s.resident_bytes > counter.peak_bytes) {
        counter.peak_bytes = s.resident_bytes;
        counter.peak_ms = ms;
      }
    }
    if (!counter.time_ms.empty()) counters.push_back(std::move(counter));
  }
  std::sort(counters.begin(), counters.end(),
            [](const auto& a, const auto& b) { return a.peak_bytes > b.peak_bytes; });
  return counters;
}

namespace {

// How the front end draws and explains the counter (processed format 63 on: `display`).
void write_display(JsonWriter& w) {
  auto row = [&](const char* source, const char* label) {
    w.begin_object();
    w.field("type", "value");
    w.field("source", source);
    w.key("format");
    w.begin_object();
    w.field("unit", "bytes");
    w.end_object();
    w.field("label", label);
    w.end_object();
  };
  w.key("display");
  w.begin_object();
  w.field("graphType", "line-accumulated");
  w.field("unit", "bytes");
  w.field("color", "orange");
  w.field("markerSchemaLocation", "timeline-memory");
  w.field("sortWeight", int64_t{20});
  w.field("label", "Memory");
  w.key("tooltipRows");
  w.begin_array();
  row("accumulated", "resident memory at this time");
  row("count-range", "resident memory range in the graph");
  w.end_array();
  w.end_object();
}

}  // namespace

void write_memory_counters(JsonWriter& w, const std::vector<MemoryCounter>& counters) {
  w.key("counters");
  w.begin_array();
  for (const MemoryCounter& c : counters) {
    w.begin_object();
    w.field("name", "Memory");
    w.field("category", "Memory");
    w.field("description",
            "Resident memory (file, anonymous and shared pages), as the kernel "
            "counts it");
    w.field("pid", c.pid_string);
    w.field("mainThreadIndex", static_cast<uint64_t>(c.main_thread_index));
    write_display(w);
    w.key("samples");
    w.begin_object();
    w.key("time");
    w.begin_array();
    for (double t : c.time_ms) w.number(t);
    w.end_array();
    w.key("count");
    w.begin_array();
    for (int64_t change : c.change) w.number(change);
    w.end_array();
    w.field("length", static_cast<uint64_t>(c.time_ms.size()));
    w.end_object();
    w.end_object();
  }
  w.end_array();
}

}  // namespace bpfprof
