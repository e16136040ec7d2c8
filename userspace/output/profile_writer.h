// Writes the profile of a session: the Firefox Profiler processed profile (format version
// 70: meta, libs, one flat thread list, shared tables), folded stacks or pprof. The tables are
// built first (profile_builder.h), then serialized; meta.extra comes from the run report.
#pragma once

#include <string>
#include <vector>

#include "userspace/model/recording.h"
#include "userspace/model/session_model.h"
#include "userspace/output/output_file.h"
#include "userspace/output/profile_builder.h"
#include "userspace/output/profile_symbolizer.h"
#include "userspace/output/run_report.h"

namespace bpfprof {

inline constexpr int kProcessedProfileVersion = 70;
inline constexpr int kGeckoProfileVersion = 36;

enum class OutputFormat {
  kFirefox,    // the Firefox Profiler's processed profile (JSON)
  kCollapsed,  // folded stacks for flamegraph.pl, inferno, speedscope: "a;b;c COUNT" lines
  kPprof,      // google/pprof's profile.proto (go tool pprof, Pyroscope, Parca)
};

struct ProfileOptions {
  bool keep_idle_threads = false;        // threads without samples are left out unless set
  std::vector<std::string> symbol_dirs;  // more places to look for debug files
  OutputFormat format = OutputFormat::kFirefox;
  bool embed_sources = false;  // --embed-sources: the sampled source files' text in the profile
};

// Writes the profile, names from `symbolizer`; returns the report it wrote to meta.extra
// (also for the folded format, which has no meta), for the end-of-run summary.
RunReport write_profile_with_report(const SessionModel& model, const Recording& recording,
                                    OutputSink& sink, const ProfileOptions& options,
                                    ProfileSymbolizer& symbolizer);

// The same with the system's symbols (options.symbol_dirs): what `record` calls, then
// print_run_summary(report) (cli/summary.h) for the end-of-run summary.
RunReport write_profile_with_report(const SessionModel& model, const Recording& recording,
                                    OutputSink& sink, const ProfileOptions& options);

// Only the figures measured on the profile (replay, tests).
ProfileSummary write_profile(const SessionModel& model, const Recording& recording,
                             OutputSink& sink, const ProfileOptions& options = {});

}  // namespace bpfprof
