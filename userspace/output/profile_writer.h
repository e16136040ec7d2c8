// Builds the Firefox Profiler processed profile (format version 70) from the session model
// and streams it as JSON into a sink: shared tables, libs, one flat thread list.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "userspace/model/recording.h"
#include "userspace/model/session_model.h"
#include "userspace/output/output_file.h"

namespace bpfprof {

inline constexpr int kProcessedProfileVersion = 70;
inline constexpr int kGeckoProfileVersion = 36;

// On-CPU sample weight with a user stack, and the part whose outermost user frame is a
// thread root (the rest begins with a [truncated] frame).
struct StackCompleteness {
  double complete = 0;
  double total = 0;
  double share() const { return total > 0 ? complete / total : 1.0; }
};

struct ProfileSummary {
  size_t processes = 0;
  size_t threads = 0;
  size_t samples = 0;  // sample rows written (consecutive identical ones are one row)
  // The functions most samples were in (self time, on-CPU samples only), "name (library)"
  // with their share of the on-CPU sample weight, most first; at most 10.
  std::vector<std::pair<std::string, double>> top_self_functions;
  // Libraries whose code could not be named, with their share of on-CPU sample weight.
  std::vector<std::pair<std::string, double>> unnamed_share_by_library;
  StackCompleteness user_stacks;
  // "name (pid)" of the processes with truncated user stacks, most truncated weight first.
  std::vector<std::pair<std::string, StackCompleteness>> incomplete_user_stacks_by_process;
  // Of unnamed_share_by_library, the paths of the first three with at least 1%: where debug
  // information would help.
  std::vector<std::string> unnamed_library_paths;
};

enum class OutputFormat {
  kFirefox,    // the Firefox Profiler's processed profile (JSON)
  kCollapsed,  // folded stacks for flamegraph.pl, inferno, speedscope: "a;b;c COUNT" lines
};

struct ProfileOptions {
  bool keep_idle_threads = false;        // threads without samples are left out unless set
  std::vector<std::string> symbol_dirs;  // more places to look for debug files
  OutputFormat format = OutputFormat::kFirefox;
};

ProfileSummary write_profile(const SessionModel& model, const Recording& recording,
                             OutputSink& sink, const ProfileOptions& options = {});

}  // namespace bpfprof
