// Maps the session model to the profile's tables: every stack to output frames (through a
// ProfileSymbolizer), the threads to write with their samples and markers (waker_labels.h),
// and the figures of the end-of-run summary (run_figures.h). All interning happens here; writing
// the tables afterwards (profile_writer.cpp, collapsed output) only reads them.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "userspace/model/recording.h"
#include "userspace/model/session_model.h"
#include "userspace/output/allocations_table.h"
#include "userspace/output/embedded_sources.h"
#include "userspace/output/memory_counters.h"
#include "userspace/output/profile_symbolizer.h"
#include "userspace/output/profile_tables.h"
#include "userspace/output/run_figures.h"
#include "userspace/output/waker_labels.h"

namespace bpfprof {

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
  // Where truncated user stacks end (UserStackFigures::truncated_at).
  std::vector<std::pair<std::string, double>> truncated_user_stacks_at;
  // Of unnamed_share_by_library, the paths of the first three with at least 1%: where debug
  // information would help.
  std::vector<std::string> unnamed_library_paths;
  // --embed-sources: what went into the sources table (nullopt when not asked).
  std::optional<EmbeddedSources> embedded_sources;
  // The processes whose waits were ended by wakers (most waiting time first, at most five).
  std::vector<ProcessWakers> top_wakers;
  // record --memory: the processes' peak resident memory, largest first.
  struct MemoryPeak {
    std::string process;  // "name (pid)"
    uint64_t bytes = 0;
    double at_ms = 0;
  };
  std::vector<MemoryPeak> memory_peaks;
  MemoryGrowth memory_growth;        // record --memory: what page-fault samples found
  AddressSpaceGrowth address_space;  // record --memory: the sampled address-space calls
  uint64_t address_space_calls_without_stack = 0;
  // record --allocations: memory_growth is the blocks allocated; these, those still held at
  // the end. The mean bytes between sampled calls.
  MemoryGrowth memory_held;
  uint64_t allocation_period = 0;
  uint64_t allocator_calls = 0;  // sampled, and of those without their caller's stack
  uint64_t allocator_calls_without_stack = 0;
};

// One entry of `threads`: what the thread object says besides its tables.
struct ThreadTables {
  std::string name;
  std::string process_name;
  Pid pid;
  std::string pid_string;       // "PID", or "PID.N" for an earlier entry of a reused/exec'd pid
  ProcessContext context;       // its process's container, pod or service
  bool show_container = false;  // in its names: not the container bpfprof itself runs in
  Tid tid;
  bool is_main_thread = false;
  double process_start_ms = 0;  // all times: ms since meta.startTime
  std::optional<double> process_end_ms;
  double register_ms = 0;
  std::optional<double> unregister_ms;
  SamplesTable samples;
  AllocationsTable allocations;  // record --memory
  MarkersTable markers;
};

struct BuiltProfile {
  LibTable libs;
  SharedTables shared;
  std::vector<ThreadTables> threads;
  std::vector<MemoryCounter> memory;  // record --memory: a counter per process
  ProfileSummary summary;
};

struct BuildOptions {
  bool keep_idle_threads = false;  // threads without samples are left out unless set
  // Whether to measure where code could not be named (the summary of the folded-stacks
  // output has never said, and the figure needs every leaf frame's library).
  bool measure_unnamed = true;
  // Put the text of the sampled source files into the sources table (--embed-sources).
  bool embed_sources = false;
};

BuiltProfile build_profile(const SessionModel& model, const Recording& recording,
                           ProfileSymbolizer& symbolizer, const BuildOptions& options);

// The name of the function of a frame: what the folded output and the summary show.
const std::string& function_name(const SharedTables& shared, FrameIndex frame);

}  // namespace bpfprof
