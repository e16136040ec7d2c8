// Reads a Firefox Profiler processed profile that bpfprof wrote (format 70, .json.gz or
// .json) back into the built tables, for `bpfprof convert`: frames, stacks, names, samples
// and native allocations as the writer had them (nothing is symbolized again), so the pprof writer
// reads the same tables as after a recording.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "userspace/output/pprof_writer.h"
#include "userspace/output/profile_builder.h"

namespace bpfprof {

struct ReadProfile {
  ReadProfile() = default;
  ReadProfile(const ReadProfile&) = delete;  // the samples tables point into `samples`
  ReadProfile& operator=(const ReadProfile&) = delete;

  BuiltProfile profile;
  PprofSettings settings;  // from meta; off_cpu when a frame is an off-CPU state
  std::vector<std::vector<ThreadSample>> samples;          // by thread: what profile.threads read
  std::vector<std::vector<ThreadAllocation>> allocations;  // by thread that has them
};

// Parses `json`; a text that is not such a profile (bad JSON, a missing table, an index out
// of range) throws std::runtime_error with a one-line reason.
std::unique_ptr<ReadProfile> parse_processed_profile(const std::string& json);

// Reads the file (gzip or plain) and parses it; errors throw std::runtime_error naming it.
std::unique_ptr<ReadProfile> read_processed_profile(const std::string& path);

}  // namespace bpfprof
