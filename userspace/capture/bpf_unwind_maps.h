// The in-kernel unwinder's maps (bpf/unwind_maps.h) as UnwindMapsSink writes them: the row
// array grown chunk by chunk, the page array written through a mapping, the rules, and the
// processes' and files' entries.
#pragma once

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <stdexcept>
#include <system_error>
#include <vector>

#include "bpf/unwind_maps.h"
#include "symbols/util/unique_handle.h"
#include "userspace/capture/bpf_map_sizes.h"
#include "userspace/capture/kernel_unwind.h"
#include "userspace/capture/mapped_array.h"
#include "userspace/capture/memory_limit.h"

namespace bpfprof {

// The row array: chunks of BPFPROF_UNWIND_CHUNK_ROWS rows, each an mmapable array map in
// the outer array of maps, added as tables need room, up to the outer array's size.
class RowChunks {
 public:
  RowChunks(bpf_map* outer, uint32_t initial_rows) : outer_(outer) {
    for (uint32_t i = 0; i < std::max<uint32_t>(row_chunks(initial_rows), 1); ++i)
      if (!grow())  // under ulimit -v, past the BPF maps: said as a lack of memory
        throw std::system_error(errno, std::generic_category(),
                                "cannot make the unwind tables' first rows");
  }

  // One more chunk; false at the bound, or where the memory cgroup has no room for it and
  // the recorder's own (a map charged past the limit would have the recorder killed).
  bool grow() {
    if (chunks_.size() >= bpf_map__max_entries(outer_)) return false;
    if (const auto room = memory_cgroup_room();
        room && *room < kRowChunkBytes + kRecorderWorkingBytes) {
      errno = ENOMEM;
      return false;
    }
    LIBBPF_OPTS(bpf_map_create_opts, options, .map_flags = BPF_F_MMAPABLE);
    UniqueFd fd(bpf_map_create(BPF_MAP_TYPE_ARRAY, "unwind_row_chunk", sizeof(uint32_t),
                               sizeof(bpfprof_unwind_row_block), BPFPROF_UNWIND_CHUNK_BLOCKS,
                               &options));
    if (!fd) return false;
    std::unique_ptr<MappedArray> rows;
    try {
      rows = std::make_unique<MappedArray>(
          fd.get(), "unwind_row_chunk", sizeof(bpfprof_unwind_row_block),
          BPFPROF_UNWIND_CHUNK_BLOCKS, sizeof(bpfprof_unwind_entry));
    } catch (const std::system_error&) {
      return false;
    }
    const auto index = static_cast<uint32_t>(chunks_.size());
    const int inner = fd.get();
    if (bpf_map_update_elem(bpf_map__fd(outer_), &index, &inner, BPF_ANY)) return false;
    chunks_.push_back({std::move(fd), std::move(rows)});
    return true;
  }

  void write(uint32_t first, const std::vector<bpfprof_unwind_entry>& rows) {
    if (uint64_t{first} + rows.size() > capacity())
      throw std::out_of_range("a write past the unwind rows' end");
    size_t done = 0;
    while (done < rows.size()) {  // a table may go on in the next chunk
      const uint64_t row = uint64_t{first} + done;
      const auto in_chunk = static_cast<uint32_t>(row % BPFPROF_UNWIND_CHUNK_ROWS);
      const size_t count =
          std::min<size_t>(rows.size() - done, BPFPROF_UNWIND_CHUNK_ROWS - in_chunk);
      chunks_[row / BPFPROF_UNWIND_CHUNK_ROWS].rows->write(in_chunk, rows.data() + done, count);
      done += count;
    }
  }
  uint32_t capacity() const {
    return static_cast<uint32_t>(chunks_.size() * BPFPROF_UNWIND_CHUNK_ROWS);
  }
  uint32_t bound() const { return bpf_map__max_entries(outer_) * BPFPROF_UNWIND_CHUNK_ROWS; }
  size_t bytes() const { return chunks_.size() * kRowChunkBytes; }

 private:
  struct Chunk {
    UniqueFd fd;
    std::unique_ptr<MappedArray> rows;
  };
  bpf_map* outer_;
  std::vector<Chunk> chunks_;
};

// The unwinder's maps in the kernel.
class BpfUnwindMaps : public UnwindMapsSink {
 public:
  BpfUnwindMaps(bpf_map* rows, uint32_t initial_rows, bpf_map* pages, bpf_map* rules,
                bpf_map* processes, bpf_map* files)
      : rows_(rows, initial_rows),
        pages_(pages, sizeof(bpfprof_unwind_page)),
        rules_(rules),
        processes_(processes),
        files_(files) {
    rules_bytes_ = bpf_map__max_entries(rules) * ((bpf_map__value_size(rules) + 7) & ~size_t{7});
  }

  uint32_t row_capacity() const override { return rows_.capacity(); }
  uint32_t row_bound() const override { return rows_.bound(); }
  bool grow_rows() override { return rows_.grow(); }
  void write_rows(uint32_t first, const std::vector<bpfprof_unwind_entry>& rows) override {
    rows_.write(first, rows);
  }
  void write_pages(uint32_t first, const std::vector<bpfprof_unwind_page>& pages) override {
    pages_.write(first, pages);
  }
  void write_rule(uint32_t index, const bpfprof_unwind_rule& rule) override {
    bpf_map__update_elem(rules_, &index, sizeof(index), &rule, sizeof(rule), BPF_ANY);
  }
  bool write_process(Pid pid, const bpfprof_process_mappings& mappings) override {
    const uint32_t key = static_cast<uint32_t>(pid.value);
    if (bpf_map__update_elem(processes_, &key, sizeof(key), &mappings, sizeof(mappings), BPF_ANY))
      return false;
    stored_.insert(pid);
    return true;
  }
  std::optional<MonotonicNs> kernel_written_at(Pid pid) override {
    const uint32_t key = static_cast<uint32_t>(pid.value);
    if (bpf_map__lookup_elem(processes_, &key, sizeof(key), entry_.get(), sizeof(*entry_), 0) ||
        !(entry_->generation & BPFPROF_KERNEL_WRITTEN_GENERATION))
      return std::nullopt;
    return MonotonicNs{entry_->kernel_written_ns};
  }
  void remove_process(Pid pid) override {
    const uint32_t key = static_cast<uint32_t>(pid.value);
    bpf_map__delete_elem(processes_, &key, sizeof(key), 0);
    stored_.erase(pid);
  }
  bool write_file(const bpfprof_file_key& key, const bpfprof_file_table& table) override {
    return bpf_map__update_elem(files_, &key, sizeof(key), &table, sizeof(table), BPF_ANY) == 0;
  }
  void remove_file(const bpfprof_file_key& key) override {
    bpf_map__delete_elem(files_, &key, sizeof(key), 0);
  }
  // The row, page and rule arrays, and the largest number of process entries held at once.
  uint64_t bytes() const {
    peak_processes_ = std::max(peak_processes_, stored_.size());
    return rows_.bytes() + pages_.bytes() + rules_bytes_ +
           peak_processes_ * sizeof(bpfprof_process_mappings);
  }

 private:
  RowChunks rows_;
  MappedArray pages_;
  bpf_map* rules_;
  bpf_map* processes_;
  bpf_map* files_;
  size_t rules_bytes_ = 0;
  std::set<Pid> stored_;
  mutable size_t peak_processes_ = 0;
  // An entry read back (10 KB: not on the stack).
  std::unique_ptr<bpfprof_process_mappings> entry_ = std::make_unique<bpfprof_process_mappings>();
};

}  // namespace bpfprof
