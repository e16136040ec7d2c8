// record --memory: each process's resident memory as a counter of the processed profile (the
// front end draws a memory track for a counter of category "Memory"), from the recording's
// memory samples, and each process's peak for the summary.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "userspace/model/recording.h"
#include "userspace/output/json_writer.h"

namespace bpfprof {

struct ThreadTables;

struct MemoryCounter {
  std::string pid_string;        // the profile process it belongs to
  std::string process_name;      // "name (pid)", for the summary
  size_t main_thread_index = 0;  // a thread of that process in the profile's threads
  std::vector<double> time_ms;   // since the profile's start
  std::vector<int64_t> change;   // bytes since the previous sample (the first: since 0)
  uint64_t peak_bytes = 0;
  double peak_ms = 0;
};

// A counter for each process of `threads` with memory samples within its lifetime.
std::vector<MemoryCounter> build_memory_counters(const Recording& recording,
                                                 const std::vector<ThreadTables>& threads);

// The profile's `counters` array.
void write_memory_counters(JsonWriter& w, const std::vector<MemoryCounter>& counters);

}  // namespace bpfprof
