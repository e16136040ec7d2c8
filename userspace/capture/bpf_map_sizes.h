// The BPF maps' sizes: set before loading, and what the kernel will charge for them against
// the memory cgroup's room; the messages of a load that failed for want of memory or rights.
#pragma once

#include <cstdint>
#include <string>

#include "bpf/unwind_maps.h"
#include "userspace/capture/bpf_programs.h"

struct bpf_object;
struct profiler_bpf;

namespace bpfprof {

// An errno value (negative, as libbpf returns it, or not) as text.
std::string errno_text(int err);

// Chunks of the row array (bpf/unwind_maps.h) that hold `rows` rows.
inline uint32_t row_chunks(uint32_t rows) {
  return (rows + BPFPROF_UNWIND_CHUNK_ROWS - 1) / BPFPROF_UNWIND_CHUNK_ROWS;
}
constexpr uint64_t kRowChunkBytes =
    uint64_t{BPFPROF_UNWIND_CHUNK_ROWS} * sizeof(bpfprof_unwind_entry);

// The recorder's own memory beside the maps while it records: the model, the unwinder's
// caches and the libraries' text it reads: what a small recording needs, as a floor.
constexpr uint64_t kRecorderWorkingBytes = 32ull << 20;
// The threads that read events and symbolize beside the main one, each with glibc's default
// stack.
constexpr uint64_t kRecorderThreads = 2;
constexpr uint64_t kThreadStackBytes = 8ull << 20;

// Why loading failed, with what to do about it. Out of memory is the maps' size against a
// memory limit (a cgroup's limit is charged for BPF maps), not a missing privilege.
std::string load_failure(int err, uint64_t ring_buffer_bytes, uint32_t unwind_rows,
                         const std::string& room = {});

// Fails before loading when the maps cannot fit under a cgroup's limit or in the address space
// `ulimit -v` leaves, with room left for the recorder. Loading anyway would let the maps take the
// last of it, and the next page the recorder touches would have it killed by the cgroup's OOM
// killer, with nothing said.
void check_memory_room(const bpf_object* object, int cpus, const BpfPrograms::Config& config);

// The unwinder's arrays sized for at most `rows` rows (none: a call graph without unwind
// tables; a slot each then, as a map needs one).
void size_unwind_maps(profiler_bpf* skel, uint32_t rows);

// The tables of what is not recorded given one entry each (a preallocated table of 65,536 costs
// milliseconds of the start-up to make): -a tracks no process by pid; the wakers', --memory's
// and --allocations' own tables.
void size_feature_maps(profiler_bpf* skel, const BpfPrograms::Config& config);

}  // namespace bpfprof
