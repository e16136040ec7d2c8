// TableBuilds::kWhenAStackNeedsThem (-a): tables in the cache are loaded as their files are
// mapped; the others are built only once a copied stack runs through their file.
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

#include "tests/unit/kernel_unwind_fixture.h"

namespace bpfprof {
namespace {

using namespace kernel_unwind_test;

const std::string kOther = std::string(TEST_FIXTURE_DIR) + "/inline_hot";

TEST(KernelUnwindTableBuilds, AFileNotInTheCacheIsBuiltOnceAStackNeedsIt) {
  Fixture f(1000, 10, /*track_all=*/true, 1, 0, 0, TableBuilds::kWhenAStackNeedsThem);
  f.cached = {kBinary};
  const Pid pid{50};
  LoadSegment cached_text, other_text;
  const LifecycleEvent other = text_mapping(pid, 0x200000000, &other_text, "other", kOther);
  const uint64_t other_pc = std::get<MmapEvent>(other.payload).mapping.start + 16;
  f.apply({start_event(pid), text_mapping(pid, 0x100000000, &cached_text, "cached"), other});

  ASSERT_EQ(f.sink.processes.at(pid).count, 2u);
  EXPECT_EQ(f.sink.processes.at(pid).mappings[0].kind, BPFPROF_MAPPING_TABLE);
  EXPECT_EQ(f.sink.processes.at(pid).mappings[1].kind, BPFPROF_MAPPING_FALLBACK);
  EXPECT_EQ(f.builds, 1);
  EXPECT_EQ(f.tables.stats().tables_from_cache, 1u);
  EXPECT_EQ(f.tables.stats().tables_built, 0u);
  EXPECT_EQ(f.tables.stats().tables_unbuilt, 1u);
  EXPECT_FALSE(f.tables.building());

  // A stack copied through the other file's code (and the cached one's, which is loaded).
  f.tables.prefer(pid, {other_pc, 0x100000000 + 16});
  EXPECT_TRUE(f.tables.wait_for_tables(std::chrono::seconds(30)));
  f.tables.flush(Fixture::kEverythingRead);
  EXPECT_EQ(f.sink.processes.at(pid).mappings[1].kind, BPFPROF_MAPPING_TABLE);
  EXPECT_EQ(f.builds, 2);
  EXPECT_EQ(f.tables.stats().tables_built, 1u);
  EXPECT_EQ(f.tables.stats().tables_unbuilt, 0u);
  EXPECT_EQ(f.tables.stats().tables_preferred, 1u);
}

// Every file's table is built without a stack asking (record -- CMD, -p).
TEST(KernelUnwindTableBuilds, EveryMappedFileIsBuiltOtherwise) {
  Fixture f(1000, 10, /*track_all=*/true, 1, 0, 0, TableBuilds::kEveryMappedFile);
  const Pid pid{51};
  LoadSegment a, b;
  f.apply({start_event(pid), text_mapping(pid, 0x100000000, &a, "a"),
           text_mapping(pid, 0x200000000, &b, "b", kOther)});
  EXPECT_EQ(f.tables.stats().tables_built, 2u);
  EXPECT_EQ(f.tables.stats().tables_unbuilt, 0u);
  EXPECT_EQ(f.sink.processes.at(pid).mappings[1].kind, BPFPROF_MAPPING_TABLE);
}

// A stack that needs the file while its cache look-up runs: the table is built when the
// look-up comes back empty, not left for a stack that will not ask again.
TEST(KernelUnwindTableBuilds, AFileNeededWhileItsCacheLookUpRunsIsBuilt) {
  std::mutex mutex;
  std::condition_variable released;
  bool looking = false;
  bool release = false;
  int built = 0;
  RecordingSink sink(1000);
  KernelUnwindTables tables(
      sink,
      [&](const std::string&, OnCacheMiss miss) -> CachedUnwindTableResult {
        std::unique_lock lock(mutex);
        looking = true;
        released.notify_all();
        released.wait(lock, [&] { return release; });
        if (miss == OnCacheMiss::kReport) return UnwindTableError::kNotInCache;
        ++built;
        CachedUnwindTable table;
        table.rows = rows_of(10);
        return table;
      },
      true, 1, TableBuilds::kWhenAStackNeedsThem);
  const Pid pid{52};
  LoadSegment text;
  const LifecycleEvent mapping = text_mapping(pid, 0x100000000, &text);
  tables.apply({start_event(pid), mapping}, 0);
  {
    std::unique_lock lock(mutex);
    released.wait(lock, [&] { return looking; });
  }
  tables.prefer(pid, {std::get<MmapEvent>(mapping.payload).mapping.start + 16});
  {
    std::lock_guard lock(mutex);
    release = true;
  }
  released.notify_all();
  for (int round = 0; round < 2; ++round) {  // the look-up, then the build it queues
    ASSERT_TRUE(tables.wait_for_tables(std::chrono::seconds(30)));
    tables.flush(Fixture::kEverythingRead);
  }
  EXPECT_EQ(built, 1);
  EXPECT_EQ(sink.processes.at(pid).mappings[0].kind, BPFPROF_MAPPING_TABLE);
  EXPECT_EQ(tables.stats().tables_unbuilt, 0u);
}

// /proc's maps list [vsyscall] above 2^63, where no user pc is: it stays out of the entry,
// whose search in BPF takes every start for a user address (it sent the vDSO's pcs to it).
TEST(KernelUnwindTableBuilds, TheVsyscallPageStaysOutOfTheEntry) {
  Fixture f;
  const Pid pid{53};
  LoadSegment text;
  f.apply({start_event(pid), text_mapping(pid, 0x100000000, &text),
           mapping_event(pid, 0xffffffffff600000, 0x1000, 0, "[vsyscall]", "")});
  const bpfprof_process_mappings& m = f.sink.processes.at(pid);
  ASSERT_EQ(m.count, 1u);
  EXPECT_EQ(m.mappings[0].kind, BPFPROF_MAPPING_TABLE);
}

}  // namespace
}  // namespace bpfprof
