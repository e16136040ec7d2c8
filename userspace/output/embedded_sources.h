// `record --embed-sources`: the text of the source files where the on-CPU samples are, put
// into the profile's sources table (`content`), so that the Firefox Profiler's source view
// works offline, without `bpfprof serve`, in a file that can be shared. Bounded in size.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "userspace/output/profile_tables.h"

namespace bpfprof {

struct EmbedLimits {
  uint64_t max_total_bytes = 4 << 20;
  uint64_t max_file_bytes = 1 << 20;
};

struct EmbeddedSources {
  size_t files = 0;       // embedded
  uint64_t bytes = 0;     // their text
  size_t unreadable = 0;  // sampled files not here (a library's build tree), or too large
  size_t left_out = 0;    // readable, but past max_total_bytes
};

// Embeds the files of `tables.sources` with a weight, heaviest first, while they fit.
// `weight_by_source`: the on-CPU sample weight of the stacks that have the file.
EmbeddedSources embed_sources(SharedTables& tables, const std::vector<double>& weight_by_source,
                              const EmbedLimits& limits = {});

}  // namespace bpfprof
