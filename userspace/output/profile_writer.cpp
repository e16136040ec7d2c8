#include "userspace/output/profile_writer.h"

#include <sys/utsname.h>
#include <unistd.h>

#include <fstream>

#include "userspace/output/collapsed_stacks.h"
#include "userspace/output/json_writer.h"
#include "userspace/output/pprof_writer.h"

namespace bpfprof {

namespace {

std::string cpu_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      size_t colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
    }
  }
  return {};
}

// The machine and the format: what the front end requires and shows in its info panel.
void write_meta_header(JsonWriter& w, const Recording& recording) {
  utsname u{};
  uname(&u);
  w.field("interval", 1000.0 / recording.frequency_hz);
  w.field("startTime", recording.start_wall_clock_ms);
  w.field("profilingStartTime", 0.0);
  w.field("profilingEndTime", (static_cast<double>(recording.end_time.value) -
                               static_cast<double>(recording.start_time.value)) /
                                  1e6);
  w.field("processType", int64_t{0});
  w.field("product", "bpfprof");
  w.field("stackwalk", int64_t{1});
  w.field("version", int64_t{kGeckoProfileVersion});
  w.field("preprocessedProfileVersion", int64_t{kProcessedProfileVersion});
  w.field("symbolicated", true);
  w.field("platform", "Linux");
  w.field("oscpu", std::string("Linux ") + u.release + " " + u.machine);
  w.field("abi", u.machine);
  w.field("CPUName", cpu_name());
  w.field("logicalCPUs", static_cast<int64_t>(sysconf(_SC_NPROCESSORS_ONLN)));
  w.field("physicalCPUs", static_cast<int64_t>(sysconf(_SC_NPROCESSORS_ONLN)));
}

// Units of the sample columns, the frame categories and the marker schemas.
void write_meta_schemas(JsonWriter& w) {
  w.key("sampleUnits");
  w.begin_object();
  w.field("time", "ms");
  w.field("eventDelay", "ms");
  w.field("threadCPUDelta", "ns");
  w.end_object();
  w.key("categories");
  w.begin_array();
  for (const CategoryInfo& category : kCategories) {
    w.begin_object();
    w.field("name", category.name);
    w.field("color", category.color);
    w.key("subcategories");
    w.begin_array();
    w.string("Other");
    w.end_array();
    w.end_object();
  }
  w.end_array();
  w.key("markerSchema");
  w.begin_array();
  MarkersTable::write_events_lost_schema(w);
  MarkersTable::write_woken_schema(w);
  MarkersTable::write_address_space_schema(w);
  w.end_array();
  write_empty_table(w, "extensions", {"id", "name", "baseURL"});
}

// meta.extra: the run report's entries, shown in the front end's profile info panel.
void write_meta_extra(JsonWriter& w, const RunReport& report) {
  w.key("extra");
  w.begin_array();
  w.begin_object();
  w.field("label", "bpfprof");
  w.key("entries");
  w.begin_array();
  for (const ReportEntry& entry : profile_extra_entries(report)) {
    w.begin_object();
    w.field("label", entry.label);
    w.field("format", entry.format);
    w.key("value");
    std::visit([&](const auto& value) { w.value(value); }, entry.value);
    w.end_object();
  }
  w.end_array();
  w.end_object();
  w.end_array();
}

void write_meta(JsonWriter& w, const Recording& recording, const RunReport& report) {
  w.key("meta");
  w.begin_object();
  write_meta_header(w, recording);
  write_meta_schemas(w);
  w.key("configuration");
  w.begin_object();
  w.key("threads");
  w.begin_array();
  w.end_array();
  w.key("features");
  w.begin_array();
  w.string(recording.sampling_event);
  w.end_array();
  w.field("capacity", int64_t{0});
  w.end_object();
  write_meta_extra(w, report);
  w.field("sampledThreads", static_cast<uint64_t>(report.profile.threads));
  w.field("lostEvents", report.lost_events);
  w.end_object();
}

// bpfprof's own field of a thread (the front end ignores it; convert reads it back).
void write_process_context(JsonWriter& w, const ProcessContext& c) {
  if (c.empty() && !c.namespace_pid && c.cgroup.empty()) return;
  w.key("processContext");
  w.begin_object();
  if (c.runtime) {
    w.field("containerRuntime", container_runtime_name(*c.runtime));
    w.field("containerId", c.container_id);
  }
  if (!c.pod_uid.empty()) w.field("podUid", c.pod_uid);
  if (c.qos) w.field("podQos", pod_qos_name(*c.qos));
  if (!c.service.empty()) w.field("service", c.service);
  if (!c.cgroup.empty()) w.field("cgroup", c.cgroup);
  if (c.namespace_pid) w.field("namespacePid", int64_t{*c.namespace_pid});
  w.end_object();
}

void write_thread(JsonWriter& w, const ThreadTables& thread) {
  auto ms_or_null = [&](std::string_view key, const std::optional<double>& ms) {
    w.key(key);
    if (ms)
      w.number(*ms);
    else
      w.null();
  };
  w.begin_object();
  w.field("processType", "default");
  w.field("processStartupTime", thread.process_start_ms);
  ms_or_null("processShutdownTime", thread.process_end_ms);
  w.field("registerTime", thread.register_ms);
  ms_or_null("unregisterTime", thread.unregister_ms);
  w.key("pausedRanges");
  w.begin_array();
  w.end_array();
  w.field("name", thread.name);
  w.field("isMainThread", thread.is_main_thread);
  w.field("pid", thread.pid_string);
  w.field("tid", int64_t{thread.tid.value});
  // The process track's label says where it runs at a glance; the object says it whole.
  w.field("processName", thread.show_container ? with_container(thread.process_name, thread.context)
                                               : thread.process_name);
  write_process_context(w, thread.context);
  thread.samples.write_json(w);
  thread.allocations.write_json(w, thread.tid);
  thread.markers.write_json(w);
  w.end_object();
}

void write_firefox(JsonWriter& w, const Recording& recording, const BuiltProfile& profile,
                   const RunReport& report) {
  w.begin_object();
  write_meta(w, recording, report);
  profile.libs.write_json(w);
  w.key("threads");
  w.begin_array();
  for (const ThreadTables& thread : profile.threads) write_thread(w, thread);
  w.end_array();
  if (!profile.memory.empty()) write_memory_counters(w, profile.memory);
  w.key("pages");
  w.begin_array();
  w.end_array();
  profile.shared.write_json(w);
  w.end_object();
}

PprofSettings pprof_settings(const Recording& recording) {
  PprofSettings settings;
  settings.start_wall_clock_ms = recording.start_wall_clock_ms;
  settings.duration_ms = ms_between(recording.start_time, recording.end_time);
  settings.interval_ms = 1000.0 / recording.frequency_hz;
  settings.off_cpu = recording.off_cpu;
  settings.memory = recording.record_memory;
  settings.held = recording.allocation_period != 0;
  settings.address_space = recording.record_memory;
  settings.comment = "bpfprof: " + recording.sampling_event + " at " +
                     std::to_string(recording.frequency_hz) + " Hz";
  return settings;
}

}  // namespace

RunReport write_profile_with_report(const SessionModel& model, const Recording& recording,
                                    OutputSink& sink, const ProfileOptions& options,
                                    ProfileSymbolizer& symbolizer) {
  const bool firefox = options.format == OutputFormat::kFirefox;
  BuildOptions build_options;
  build_options.keep_idle_threads = options.keep_idle_threads;
  build_options.measure_unnamed = options.format != OutputFormat::kCollapsed;
  build_options.embed_sources = firefox && options.embed_sources;
  const BuiltProfile profile = build_profile(model, recording, symbolizer, build_options);
  RunReport report = build_run_report(recording, model, profile.summary);
  if (firefox) {
    JsonWriter w(sink);
    write_firefox(w, recording, profile, report);
    w.flush();
  } else if (options.format == OutputFormat::kPprof) {
    write_pprof(profile, pprof_settings(recording), sink);
  } else {
    write_collapsed_stacks(profile, sink);
  }
  return report;
}

RunReport write_profile_with_report(const SessionModel& model, const Recording& recording,
                                    OutputSink& sink, const ProfileOptions& options) {
  SystemSymbolizer symbolizer(SymbolizerOptions{options.symbol_dirs});
  return write_profile_with_report(model, recording, sink, options, symbolizer);
}

ProfileSummary write_profile(const SessionModel& model, const Recording& recording,
                             OutputSink& sink, const ProfileOptions& options) {
  return write_profile_with_report(model, recording, sink, options).profile;
}

}  // namespace bpfprof
