#include "userspace/capture/bpf_map_sizes.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <initializer_list>
#include <stdexcept>
#include <utility>

#include "profiler.skel.h"
#include "userspace/capture/memory_limit.h"

namespace bpfprof {

std::string errno_text(int err) { return strerror(err < 0 ? -err : err); }

std::string load_failure(int err, uint64_t ring_buffer_bytes, uint32_t unwind_rows,
                         const std::string& room) {
  const std::string limit = room.empty() ? "" : " (" + room + ")";
  if (err == -ENOMEM || err == ENOMEM) {
    const uint64_t table_mb = uint64_t{unwind_rows} * sizeof(bpfprof_unwind_entry) >> 20;
    return "cannot load the BPF programs: out of memory for their maps (ring buffer " +
           std::to_string(ring_buffer_bytes >> 20) + " MB, unwind tables " +
           std::to_string(table_mb) + " MB) under this process's memory limit" + limit +
           "; try a smaller --buffer-size, or --call-graph dwarf-copy (no unwind tables)";
  }
  return "cannot load the BPF programs (" + errno_text(err) +
         "); bpfprof needs root (CAP_BPF and CAP_PERFMON) and a kernel with BTF";
}

namespace {

// What the kernel will charge for the object's maps, from their sizes before loading (as
// bpftool's memlock counts them). A preallocated hash map holds every element up front, each
// with a header of ~48 bytes, and a 16-byte bucket per entry rounded up to a power of two.
uint64_t map_bytes(const bpf_object* object, int cpus) {
  uint64_t total = 0;
  const bpf_map* map = nullptr;
  bpf_object__for_each_map(map, object) {
    const uint64_t entries = bpf_map__max_entries(map);
    const uint64_t value = (bpf_map__value_size(map) + 7) & ~uint64_t{7};
    const uint64_t key = (bpf_map__key_size(map) + 7) & ~uint64_t{7};
    switch (bpf_map__type(map)) {
      case BPF_MAP_TYPE_RINGBUF:
        total += entries;
        break;
      case BPF_MAP_TYPE_ARRAY:
        total += value * entries;
        break;
      case BPF_MAP_TYPE_PERCPU_ARRAY:
        total += value * entries * static_cast<uint64_t>(cpus);
        break;
      case BPF_MAP_TYPE_HASH:
      case BPF_MAP_TYPE_LRU_HASH:
        total += std::bit_ceil(entries) * 16;
        if (!(bpf_map__map_flags(map) & BPF_F_NO_PREALLOC)) total += (48 + key + value) * entries;
        break;
      default:
        break;  // allocated as used (task storage), or small
    }
  }
  return total;
}

// What loading maps into this process's address space: a ring buffer's data pages and its two
// position pages (ring_reader.h), arrays the program shares with the recorder, global data.
uint64_t mapped_bytes(const bpf_object* object) {
  uint64_t total = 0;
  const bpf_map* map = nullptr;
  bpf_object__for_each_map(map, object) {
    if (bpf_map__type(map) == BPF_MAP_TYPE_RINGBUF)
      total += uint64_t{bpf_map__max_entries(map)} + 2 * 4096;
    else if (bpf_map__map_flags(map) & BPF_F_MMAPABLE)
      total += uint64_t{bpf_map__value_size(map)} * bpf_map__max_entries(map);
  }
  return total;
}

// Address space beside the maps: libbpf's copy of the kernel's BTF and its parse, and the
// recorder's threads' stacks.
uint64_t unmapped_needs() {
  std::error_code error;
  const uint64_t btf = std::filesystem::file_size("/sys/kernel/btf/vmlinux", error);
  return (error ? 0 : 2 * btf) + kRecorderThreads * kThreadStackBytes;
}

void check_address_space(const bpf_object* object, const BpfPrograms::Config& config) {
  const auto room = address_space_room();
  if (!room) return;
  const uint64_t needed = mapped_bytes(object) + kRecorderWorkingBytes + unmapped_needs();
  if (needed <= *room) return;
  throw std::runtime_error(
      load_failure(-ENOMEM, config.ring_buffer_bytes, config.unwind_initial_rows,
                   "ulimit -v: " + std::to_string(*room >> 20) + " MB left, " +
                       std::to_string(needed >> 20) + " MB needed with the recorder's own"));
}

}  // namespace

void check_memory_room(const bpf_object* object, int cpus, const BpfPrograms::Config& config) {
  check_address_space(object, config);
  const auto room = memory_cgroup_room();
  if (!room) return;
  const uint64_t needed = map_bytes(object, cpus) + kRecorderWorkingBytes +
                          row_chunks(config.unwind_initial_rows) * kRowChunkBytes;
  if (needed <= *room) return;
  throw std::runtime_error(
      load_failure(-ENOMEM, config.ring_buffer_bytes, config.unwind_initial_rows,
                   "cgroup: " + std::to_string(*room >> 20) + " MB left, " +
                       std::to_string(needed >> 20) + " MB needed with the recorder's own"));
}

namespace {

void set_sizes(std::initializer_list<std::pair<bpf_map*, uint32_t>> sizes) {
  for (const auto& [map, entries] : sizes)
    if (int err = bpf_map__set_max_entries(map, entries))
      throw std::runtime_error(std::string("cannot size ") + bpf_map__name(map) + ": " +
                               errno_text(err));
}

}  // namespace

void size_unwind_maps(profiler_bpf* skel, uint32_t rows) {
  set_sizes({{skel->maps.unwind_rows, std::max<uint32_t>(row_chunks(rows), 1)},
             {skel->maps.unwind_pages, rows ? BPFPROF_UNWIND_PAGE_CAPACITY : 1},
             {skel->maps.unwind_rules, rows ? BPFPROF_UNWIND_RULE_CAPACITY : 1}});
}

void size_feature_maps(profiler_bpf* skel, const BpfPrograms::Config& config) {
  const uint32_t threads = std::max<uint32_t>(config.thread_cache_entries, 1);
  set_sizes(
      {{skel->maps.tracked_processes,
        config.track_all_processes ? 1 : std::max<uint32_t>(config.max_tracked_processes, 1)},
       {skel->maps.waker_stack_taken, config.record_wakers ? threads : 1},
       {skel->maps.python_thread_states, threads},
       {skel->maps.ruby_threads, threads},
       {skel->maps.beam_threads, std::min(threads, bpf_map__max_entries(skel->maps.beam_threads))},
       {skel->maps.memory_sent,
        config.record_memory ? bpf_map__max_entries(skel->maps.memory_sent) : 1},
       {skel->maps.allocating_threads,
        config.allocation_period ? bpf_map__max_entries(skel->maps.allocating_threads) : 1},
       {skel->maps.sampled_blocks,
        config.allocation_period ? BpfPrograms::Config::kSampledBlocks : 1}});
}

}  // namespace bpfprof
