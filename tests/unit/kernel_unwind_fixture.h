// The in-kernel unwinder's bookkeeping (capture/kernel_unwind) without BPF: a sink that keeps
// what it writes, as the BPF maps would, and the lifecycle events that drive it.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "symbols/elf/elf_file.h"
#include "userspace/capture/kernel_unwind.h"

namespace bpfprof::kernel_unwind_test {

inline const std::string kBinary = std::string(TEST_FIXTURE_DIR) + "/unwind_qsort";

// Keeps what the bookkeeping writes, as the BPF maps would.
class RecordingSink : public UnwindMapsSink {
 public:
  // Room for `capacity` rows, growing `chunk` rows at a time up to `bound`.
  explicit RecordingSink(uint32_t capacity, uint32_t bound = 0, uint32_t chunk = 0)
      : rows(capacity), bound(std::max(bound, capacity)), chunk(chunk) {}
  uint32_t row_capacity() const override { return static_cast<uint32_t>(rows.size()); }
  uint32_t row_bound() const override { return bound; }
  bool grow_rows() override {
    if (chunk == 0 || rows.size() + chunk > bound) return false;
    rows.resize(rows.size() + chunk);
    return true;
  }
  void write_rows(uint32_t first, const std::vector<bpfprof_unwind_entry>& written) override {
    for (size_t i = 0; i < written.size(); ++i) rows.at(first + i) = written[i];
    row_writes += written.size();
  }
  void write_pages(uint32_t first, const std::vector<bpfprof_unwind_page>& written) override {
    if (pages.size() < first + written.size()) pages.resize(first + written.size());
    for (size_t i = 0; i < written.size(); ++i) pages[first + i] = written[i];
  }
  void write_rule(uint32_t index, const bpfprof_unwind_rule& rule) override { rules[index] = rule; }
  bool write_process(Pid pid, const bpfprof_process_mappings& m) override {
    if (processes.size() >= process_limit && !processes.contains(pid)) return false;
    processes[pid] = m;
    return true;
  }
  std::optional<MonotonicNs> kernel_written_at(Pid pid) override {
    auto it = processes.find(pid);
    if (it == processes.end() || !(it->second.generation & BPFPROF_KERNEL_WRITTEN_GENERATION))
      return std::nullopt;
    return MonotonicNs{it->second.kernel_written_ns};
  }
  void remove_process(Pid pid) override { processes.erase(pid); }
  bool write_file(const bpfprof_file_key& key, const bpfprof_file_table& table) override {
    files[{key.dev, key.inode}] = table;
    return true;
  }
  void remove_file(const bpfprof_file_key& key) override { files.erase({key.dev, key.inode}); }

  std::vector<bpfprof_unwind_entry> rows;
  uint32_t bound;
  uint32_t chunk;
  std::vector<bpfprof_unwind_page> pages;
  std::map<uint32_t, bpfprof_unwind_rule> rules;
  size_t row_writes = 0;
  size_t process_limit = 100;
  std::map<Pid, bpfprof_process_mappings> processes;
  std::map<std::pair<uint64_t, uint64_t>, bpfprof_file_table> files;  // by device and inode
};

inline std::vector<bpfprof_unwind_row> rows_of(uint32_t count) {
  std::vector<bpfprof_unwind_row> rows(count);
  for (uint32_t i = 0; i < count; ++i)
    rows[i] = {0x1000 + 16 * i, 8, 0, BPFPROF_CFA_RSP, 0, 0, 0, 0};
  return rows;
}

inline LifecycleEvent mapping_event(Pid pid, uint64_t start, uint64_t length, uint64_t offset,
                                    const std::string& path, const std::string& build_id = "id") {
  MappingInfo m;
  m.start = start;
  m.length = length;
  m.file_offset = offset;
  m.path = path;
  m.build_id = build_id;
  return LifecycleEvent{MonotonicNs{1}, MmapEvent{pid, Tid{pid.value}, m}};
}

inline LifecycleEvent start_event(Pid pid) {
  return LifecycleEvent{MonotonicNs{1}, ProcessStartEvent{pid, "p", false}};
}

// The executable segment of the test binary, mapped at `base` as the loader would.
inline LifecycleEvent text_mapping(Pid pid, uint64_t base, LoadSegment* segment,
                                   const std::string& build_id = "id",
                                   const std::string& path = kBinary) {
  std::unique_ptr<ElfFile> elf = ElfFile::open(path, nullptr);
  EXPECT_TRUE(elf);
  for (const LoadSegment& s : elf->load_segments())
    if (s.executable()) *segment = s;
  const uint64_t page_offset = segment->file_offset & ~uint64_t{4095};
  return mapping_event(pid, base + (segment->vaddr & ~uint64_t{4095}), 4096, page_offset, path,
                       build_id);
}

struct Fixture {
  explicit Fixture(uint32_t capacity = 1000, uint32_t table_rows = 10, bool track_all = false,
                   unsigned workers = 1, uint32_t bound = 0, uint32_t chunk = 0,
                   TableBuilds table_builds = TableBuilds::kEveryMappedFile)
      : sink(capacity, bound, chunk),
        tables(
            sink,
            [this, table_rows](const std::string& path,
                               OnCacheMiss miss) -> CachedUnwindTableResult {
              if (!cached.contains(path) && miss == OnCacheMiss::kReport)
                return UnwindTableError::kNotInCache;
              ++builds;
              if (path == "/nonexistent") return UnwindTableError::kUnreadable;
              if (path == "/crafted") return UnwindTableError::kTooManyRows;
              CachedUnwindTable table;
              table.rows = rows_of(table_rows);
              if (cached.contains(path)) {  // as the cache gives it: the compact form alone
                table.source = UnwindTableSource::kCache;
                table.compact = compact_unwind_table(table.rows);
                table.rows.clear();
              }
              return table;
            },
            track_all, workers, table_builds) {}
  void apply(const std::vector<LifecycleEvent>& events) {
    tables.apply(events, 0);
    EXPECT_TRUE(tables.wait_for_tables(std::chrono::seconds(30)));
    tables.flush(kEverythingRead);
  }
  // As if the side band had been read to now, and now were later than any event.
  static constexpr MonotonicNs kEverythingRead{UINT64_MAX};
  RecordingSink sink;
  std::atomic<int> builds = 0;   // tables built or read from the cache
  std::set<std::string> cached;  // paths whose table the cache holds (set before any event)
  KernelUnwindTables tables;
};

}  // namespace bpfprof::kernel_unwind_test
