// The in-kernel unwinder's bookkeeping (capture/kernel_unwind) without BPF: which tables are
// built and loaded where, and what each process's mapping array says.
#include "userspace/capture/kernel_unwind.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "symbols/elf/elf_file.h"
#include "tests/unit/kernel_unwind_fixture.h"

namespace bpfprof {
namespace {

using namespace kernel_unwind_test;

TEST(KernelUnwindTables, LoadsATableOnceAndGivesEachMappingItsBias) {
  Fixture f;
  LoadSegment text;
  const uint64_t base = 0x555500000000;
  f.apply({start_event(Pid{10}), text_mapping(Pid{10}, base, &text), start_event(Pid{11}),
           text_mapping(Pid{11}, base + 0x10000000, &text)});
  EXPECT_EQ(f.builds, 1);
  EXPECT_EQ(f.sink.row_writes, 10u);  // shared by both processes
  ASSERT_EQ(f.sink.processes.size(), 2u);
  for (auto [pid, offset] : {std::pair{Pid{10}, uint64_t{0}}, {Pid{11}, uint64_t{0x10000000}}}) {
    const bpfprof_process_mappings& m = f.sink.processes.at(pid);
    ASSERT_EQ(m.count, 1u);
    EXPECT_EQ(m.mappings[0].kind, BPFPROF_MAPPING_TABLE);
    EXPECT_EQ(m.mappings[0].first_page, 0u);
    EXPECT_EQ(m.mappings[0].page_count, 1u);  // rows_of's rows lie in one 64 KiB page
    EXPECT_EQ(m.mappings[0].page_base, 0u);
    // A runtime address minus the bias is the ELF virtual address.
    const uint64_t runtime = base + offset + text.vaddr + 5;
    EXPECT_EQ(runtime - m.mappings[0].bias, text.vaddr + 5);
  }
  EXPECT_EQ(f.tables.stats().tables_built, 1u);
  EXPECT_EQ(f.tables.stats().rows_loaded, 10u);
  // Ten rows of one rule: the page holds the ten, naming the one rule.
  ASSERT_EQ(f.sink.pages.size(), 1u);
  EXPECT_EQ(f.sink.pages[0].first_row, 0u);
  EXPECT_EQ(f.sink.pages[0].row_count, 10u);
  ASSERT_EQ(f.sink.rules.size(), 1u);
  EXPECT_EQ(f.sink.rules.at(0).cfa_rule, BPFPROF_CFA_RSP);
  EXPECT_EQ(f.sink.rules.at(0).cfa_offset, 8);
  for (uint32_t i = 0; i < 10; ++i) {
    EXPECT_EQ(f.sink.rows[i].pc_low, 0x1000 + 16 * i);
    EXPECT_EQ(f.sink.rows[i].rule, 0u);
  }
}

// Workers build tables at once: each file's table once, every one loaded, none overlapping.
TEST(KernelUnwindTables, WorkersBuildTablesAtOnceEachOnce) {
  Fixture f(/*capacity=*/1000, /*table_rows=*/10, /*track_all=*/false, /*workers=*/3);
  LoadSegment text;
  std::vector<LifecycleEvent> events;
  for (int i = 0; i < 6; ++i) {
    events.push_back(start_event(Pid{80 + i}));
    events.push_back(text_mapping(Pid{80 + i}, 0x100000000, &text, "id" + std::to_string(i % 4)));
  }
  f.apply(events);
  EXPECT_EQ(f.builds.load(), 4);
  EXPECT_EQ(f.tables.stats().rows_loaded, 40u);
  std::set<uint32_t> pages;
  for (int i = 0; i < 6; ++i) {
    const bpfprof_exec_mapping& m = f.sink.processes.at(Pid{80 + i}).mappings[0];
    EXPECT_EQ(m.kind, BPFPROF_MAPPING_TABLE);
    pages.insert(m.first_page);
  }
  EXPECT_EQ(pages.size(), 4u);
}

// A loaded table is also named as a VMA names its file (device in the kernel's encoding,
// inode), with the file offset -> ELF address shift of its executable segment, so that the
// walker finds it for a pc whose mapping userspace has not written yet.
TEST(KernelUnwindTables, ALoadedTableIsFoundByTheDeviceAndInodeOfItsFile) {
  Fixture f;
  LoadSegment text;
  f.apply({start_event(Pid{12}), text_mapping(Pid{12}, 0x555500000000, &text)});
  struct stat status;
  ASSERT_EQ(stat(kBinary.c_str(), &status), 0);
  const std::pair<uint64_t, uint64_t> key{
      uint64_t{major(status.st_dev)} << 20 | minor(status.st_dev), status.st_ino};
  ASSERT_EQ(f.sink.files.count(key), 1u);
  const bpfprof_file_table& table = f.sink.files.at(key);
  EXPECT_EQ(table.first_page, 0u);
  EXPECT_EQ(table.page_count, 1u);
  EXPECT_EQ(table.page_base, 0u);
  EXPECT_EQ(table.vaddr_minus_offset, text.vaddr - text.file_offset);
}

// `record -- CMD`: the tables of the files the command will map are loaded before it runs;
// its mappings, when they come, find them loaded and build nothing.
TEST(KernelUnwindTables, PreloadedTablesServeTheMappingsThatFollow) {
  Fixture f;
  f.tables.preload({kBinary});
  EXPECT_TRUE(f.tables.wait_for_tables(std::chrono::seconds(30)));
  f.tables.flush(Fixture::kEverythingRead);
  const int preloaded = f.builds;
  EXPECT_GE(preloaded, 1);             // the binary (and the vDSO where this kernel has one)
  EXPECT_EQ(f.sink.files.size(), 1u);  // the vDSO is no file a VMA names
  // As the kernel reports it with the mapping: the file's own build-id.
  const std::vector<uint8_t> id = ElfFile::open(kBinary, nullptr)->build_id();
  LoadSegment text;
  f.apply({start_event(Pid{13}),
           text_mapping(Pid{13}, 0x555500000000, &text, std::string(id.begin(), id.end()))});
  EXPECT_EQ(f.builds, preloaded);
  ASSERT_EQ(f.sink.processes.at(Pid{13}).count, 1u);
  EXPECT_EQ(f.sink.processes.at(Pid{13}).mappings[0].kind, BPFPROF_MAPPING_TABLE);
}

TEST(KernelUnwindTables, UntrackedProcessesGetNothing) {
  Fixture f;
  LoadSegment text;
  f.apply({text_mapping(Pid{20}, 0x400000000, &text)});
  EXPECT_EQ(f.builds, 0);
  EXPECT_TRUE(f.sink.processes.empty());
  // ... until their fork event arrives (from the other ring, after the mappings).
  f.apply({LifecycleEvent{MonotonicNs{2}, ForkEvent{Pid{1}, Tid{1}, Pid{20}, Tid{20}}}});
  EXPECT_EQ(f.builds, 1);
  EXPECT_TRUE(f.sink.processes.contains(Pid{20}));
}

TEST(KernelUnwindTables, KindsForAnonymousUnreadableAndOversizedFiles) {
  Fixture f(/*capacity=*/15, /*table_rows=*/10);
  LoadSegment text;
  f.apply({start_event(Pid{30}), text_mapping(Pid{30}, 0x100000000, &text),
           mapping_event(Pid{30}, 0x7000000000, 4096, 0, "//anon", ""),
           mapping_event(Pid{30}, 0x7100000000, 4096, 0, "/nonexistent", "other"),
           mapping_event(Pid{30}, 0x7200000000, 4096, 0, kBinary, "third")});
  const bpfprof_process_mappings& m = f.sink.processes.at(Pid{30});
  ASSERT_EQ(m.count, 4u);
  EXPECT_EQ(m.mappings[0].kind, BPFPROF_MAPPING_TABLE);
  EXPECT_EQ(m.mappings[1].kind, BPFPROF_MAPPING_FRAME_POINTERS);  // JIT code
  EXPECT_EQ(m.mappings[2].kind, BPFPROF_MAPPING_FALLBACK);        // no table
  EXPECT_EQ(m.mappings[3].kind, BPFPROF_MAPPING_FALLBACK);        // did not fit
  EXPECT_EQ(f.tables.stats().files_over_capacity, 1u);
  EXPECT_EQ(f.tables.stats().tables_failed, 1u);
}

// A file past a bound of the table builder gets no table: its samples fall back to stack
// copies, and the summary says which file and why.
TEST(KernelUnwindTables, AFileThatPassesTheBuildersBoundsFallsBackAndIsCounted) {
  Fixture f;
  f.apply({start_event(Pid{35}), mapping_event(Pid{35}, 0x7000000000, 4096, 0, "/crafted", "x")});
  const bpfprof_process_mappings& m = f.sink.processes.at(Pid{35});
  ASSERT_EQ(m.count, 1u);
  EXPECT_EQ(m.mappings[0].kind, BPFPROF_MAPPING_FALLBACK);
  EXPECT_EQ(f.tables.stats().tables_past_row_limit, 1u);
  EXPECT_EQ(f.tables.stats().tables_failed, 0u);
  EXPECT_EQ(f.tables.stats().tables_skipped_files, std::vector<std::string>{"/crafted"});
}

TEST(KernelUnwindTables, ExecClearsForkCopiesExitRemoves) {
  Fixture f;
  LoadSegment text;
  f.apply({start_event(Pid{40}), text_mapping(Pid{40}, 0x100000000, &text),
           LifecycleEvent{MonotonicNs{2}, ForkEvent{Pid{40}, Tid{40}, Pid{41}, Tid{41}}}});
  EXPECT_EQ(f.sink.processes.at(Pid{41}).count, 1u);
  f.apply({LifecycleEvent{MonotonicNs{3}, AddressSpaceResetEvent{Pid{41}, Tid{41}}}});
  EXPECT_EQ(f.sink.processes.at(Pid{41}).count, 0u);
  f.apply({LifecycleEvent{MonotonicNs{4}, ExitEvent{Pid{40}, Tid{40}, CpuTimeNs{0}, 0, true}}});
  EXPECT_FALSE(f.sink.processes.contains(Pid{40}));
  EXPECT_TRUE(f.sink.processes.contains(Pid{41}));
}

// The side band's rings (one per CPU) are read one after another: an exec on one CPU can be
// read a drain later than the new image's first mmaps on another (the vDSO, the program). Those
// stay; the old image's mappings, read late, do not come back.
TEST(KernelUnwindTables, AnExecReadAfterTheNewImagesMappingsKeepsThem) {
  Fixture f;
  LoadSegment text;
  f.apply({start_event(Pid{45}), text_mapping(Pid{45}, 0x100000000, &text)});  // at 1
  LifecycleEvent vdso = mapping_event(Pid{45}, 0x7fff00000000, 8192, 0, "[vdso]", "");
  vdso.time = MonotonicNs{20};
  LifecycleEvent program = text_mapping(Pid{45}, 0x200000000, &text);
  program.time = MonotonicNs{21};
  f.apply({vdso, program});
  LifecycleEvent old_image = text_mapping(Pid{45}, 0x300000000, &text);
  old_image.time = MonotonicNs{5};
  f.apply({LifecycleEvent{MonotonicNs{10}, AddressSpaceResetEvent{Pid{45}, Tid{45}}}, old_image});
  const bpfprof_process_mappings& entry = f.sink.processes.at(Pid{45});
  ASSERT_EQ(entry.count, 2u);
  EXPECT_EQ(entry.mappings[0].start, 0x200000000 + (text.vaddr & ~uint64_t{4095}));
  EXPECT_EQ(entry.mappings[1].start, 0x7fff00000000u);
}

// A zygote's renderer, a multiprocessing worker: forked without exec, it runs its parent's
// mappings, also those the side band reports after the fork (another ring) but made before it.
TEST(KernelUnwindTables, AParentsMappingReadAfterAForkIsTheChildsIfMadeBeforeIt) {
  Fixture f;
  LoadSegment text;
  LifecycleEvent late = text_mapping(Pid{70}, 0x100000000, &text);  // at 1
  LifecycleEvent after_fork = text_mapping(Pid{70}, 0x200000000, &text);
  after_fork.time = MonotonicNs{5};
  f.apply({start_event(Pid{70}),
           LifecycleEvent{MonotonicNs{2}, ForkEvent{Pid{70}, Tid{70}, Pid{71}, Tid{71}}},
           LifecycleEvent{MonotonicNs{3}, ForkEvent{Pid{70}, Tid{70}, Pid{72}, Tid{72}}},
           LifecycleEvent{MonotonicNs{3}, AddressSpaceResetEvent{Pid{72}, Tid{72}}}, late,
           after_fork});
  EXPECT_EQ(f.sink.processes.at(Pid{70}).count, 2u);
  EXPECT_EQ(f.sink.processes.at(Pid{71}).count, 1u);  // the one made before its fork
  EXPECT_EQ(f.sink.processes.at(Pid{71}).mappings[0].start,
            0x100000000 + (text.vaddr & ~uint64_t{4095}));
  EXPECT_EQ(f.sink.processes.at(Pid{72}).count, 0u);  // exec'd: another image
}

// The other order: the child's first mmap after the fork (a renderer's own heap or code) read
// before the fork event. The child has both: what it inherited and what it mapped itself.
TEST(KernelUnwindTables, AChildsOwnMappingReadBeforeItsForkKeepsWhatItInherited) {
  Fixture f;
  LoadSegment text;
  LifecycleEvent own = text_mapping(Pid{75}, 0x200000000, &text);
  own.time = MonotonicNs{5};
  LifecycleEvent parents_later = text_mapping(Pid{74}, 0x300000000, &text);
  parents_later.time = MonotonicNs{6};
  f.apply({start_event(Pid{74}), text_mapping(Pid{74}, 0x100000000, &text), own, parents_later,
           LifecycleEvent{MonotonicNs{2}, ForkEvent{Pid{74}, Tid{74}, Pid{75}, Tid{75}}}});
  const bpfprof_process_mappings& child = f.sink.processes.at(Pid{75});
  ASSERT_EQ(child.count, 2u);  // the parent's from before the fork, and its own
  EXPECT_EQ(child.mappings[0].start, 0x100000000 + (text.vaddr & ~uint64_t{4095}));
  EXPECT_EQ(child.mappings[1].start, 0x200000000 + (text.vaddr & ~uint64_t{4095}));
}

// A JIT that takes its mmap lock all the time (munmap, mprotect) has the kernel rewrite its
// entry (file mappings only) after every read of the side band: ours, with the JIT's code,
// goes in once it has waited 100 ms for the kernel's to grow old.
TEST(KernelUnwindTables, AnEntryTheKernelKeepsRewritingIsReplacedAfterAWhile) {
  Fixture f;
  LoadSegment text;
  f.apply({start_event(Pid{61}), text_mapping(Pid{61}, 0x100000000, &text)});
  bpfprof_process_mappings kernels{};
  kernels.generation = BPFPROF_KERNEL_WRITTEN_GENERATION | 9;
  uint64_t now = 1'000'000;
  auto kernel_rewrites = [&] {  // as on_mmap_lock does: only an entry it wrote itself
    auto& entry = f.sink.processes[Pid{61}];
    if (!(entry.generation & BPFPROF_KERNEL_WRITTEN_GENERATION) && entry.count) return;
    kernels.kernel_written_ns = now + 1;  // just after each read
    entry = kernels;
  };
  kernels.kernel_written_ns = now + 1;  // the new image's entry, from its VMAs at its exec
  f.sink.processes[Pid{61}] = kernels;
  f.tables.apply({text_mapping(Pid{61}, 0x200000000, &text)}, 0);
  for (; now < 1'000'000 + 90'000'000; now += 10'000'000) {
    kernel_rewrites();
    f.tables.flush(MonotonicNs{now});
    EXPECT_TRUE(f.sink.processes.at(Pid{61}).generation & BPFPROF_KERNEL_WRITTEN_GENERATION);
  }
  for (; now < 1'000'000 + 120'000'000; now += 10'000'000) {
    kernel_rewrites();
    f.tables.flush(MonotonicNs{now});
  }
  EXPECT_FALSE(f.sink.processes.at(Pid{61}).generation & BPFPROF_KERNEL_WRITTEN_GENERATION);
  EXPECT_EQ(f.sink.processes.at(Pid{61}).count, 2u);
}

// The BPF side looked its own entry up just before our write and stored its VMA scan (no JIT
// code) just after it: the next flush writes ours again, once.
TEST(KernelUnwindTables, AnEntryTheKernelStoredOverOursIsWrittenAgain) {
  Fixture f;
  LoadSegment text;
  f.apply({start_event(Pid{62}), text_mapping(Pid{62}, 0x100000000, &text),
           text_mapping(Pid{62}, 0x200000000, &text)});
  ASSERT_EQ(f.sink.processes.at(Pid{62}).count, 2u);
  auto& entry = f.sink.processes[Pid{62}] = {};
  entry.count = 1;
  entry.generation = BPFPROF_KERNEL_WRITTEN_GENERATION | 3;
  entry.kernel_written_ns = 900'000;  // its scan began before the side band's read
  f.tables.flush(MonotonicNs{2'000'000});
  EXPECT_FALSE(f.sink.processes.at(Pid{62}).generation & BPFPROF_KERNEL_WRITTEN_GENERATION);
  EXPECT_EQ(f.sink.processes.at(Pid{62}).count, 2u);
  f.tables.flush(MonotonicNs{3'000'000});
  EXPECT_EQ(f.tables.stats().entries_overwritten_by_kernel, 1u);
}

// A shell's child execs; ld.so maps its libraries and the BPF side rewrites the entry from the
// VMAs at each mmap. Our entry, from a side band read before those mmaps, has the program
// alone: it must not replace the kernel's until we have read past the kernel's write.
TEST(KernelUnwindTables, AnEntryTheKernelWroteAfterOurReadStays) {
  Fixture f;
  LoadSegment text;
  f.apply({start_event(Pid{60}), text_mapping(Pid{60}, 0x100000000, &text)});
  bpfprof_process_mappings kernels{};
  kernels.count = 3;
  kernels.generation = BPFPROF_KERNEL_WRITTEN_GENERATION | 7;
  kernels.kernel_written_ns = 5000;
  f.sink.processes[Pid{60}] = kernels;
  LifecycleEvent new_program = text_mapping(Pid{60}, 0x200000000, &text);
  new_program.time = MonotonicNs{4001};
  const std::vector<LifecycleEvent> exec{
      LifecycleEvent{MonotonicNs{4000}, AddressSpaceResetEvent{Pid{60}, Tid{60}}}, new_program};
  f.tables.apply(exec, 0);
  f.tables.flush(MonotonicNs{4500});  // read before the kernel's write: ours is older
  EXPECT_EQ(f.sink.processes.at(Pid{60}).generation, kernels.generation);
  f.tables.flush(MonotonicNs{4900});
  EXPECT_EQ(f.sink.processes.at(Pid{60}).generation, kernels.generation);
  f.tables.flush(MonotonicNs{5100});  // read past it: ours has all it had
  const bpfprof_process_mappings& ours = f.sink.processes.at(Pid{60});
  EXPECT_FALSE(ours.generation & BPFPROF_KERNEL_WRITTEN_GENERATION);
  EXPECT_EQ(ours.kernel_written_ns, 0u);
  ASSERT_EQ(ours.count, 1u);
  EXPECT_EQ(ours.mappings[0].start, 0x200000000u + (text.vaddr & ~uint64_t{4095}));
  // An entry userspace wrote is replaced at once.
  LifecycleEvent anon = mapping_event(Pid{60}, 0x7000000000, 4096, 0, "//anon", "");
  anon.time = MonotonicNs{5150};
  f.tables.apply({anon}, 0);
  f.tables.flush(MonotonicNs{5200});
  EXPECT_EQ(f.sink.processes.at(Pid{60}).count, 2u);
}

// The walker's row cache is valid for one write of one process's mappings: each write has a
// generation of its own, never 0 (an empty cache entry).
TEST(KernelUnwindTables, EveryWriteHasItsOwnGeneration) {
  Fixture f;
  LoadSegment text;
  f.apply({start_event(Pid{50}), text_mapping(Pid{50}, 0x100000000, &text)});
  const uint32_t first = f.sink.processes.at(Pid{50}).generation;
  f.apply({LifecycleEvent{MonotonicNs{2}, ForkEvent{Pid{50}, Tid{50}, Pid{51}, Tid{51}}}});
  const uint32_t child = f.sink.processes.at(Pid{51}).generation;
  f.apply({mapping_event(Pid{50}, 0x7000000000, 4096, 0, "//anon", "")});
  const uint32_t remapped = f.sink.processes.at(Pid{50}).generation;
  EXPECT_NE(first, 0u);
  EXPECT_NE(child, first);
  EXPECT_NE(remapped, first);
  EXPECT_NE(remapped, child);
}

TEST(KernelUnwindTables, KeepsTheLowestMappingsOfAProcessWithTooMany) {
  Fixture f;
  std::vector<LifecycleEvent> events{start_event(Pid{50})};
  for (uint64_t i = 0; i < BPFPROF_MAX_PROCESS_MAPPINGS + 5; ++i)
    events.push_back(mapping_event(Pid{50}, 0x7000000000 + i * 0x10000, 4096, 0, "//anon", ""));
  f.apply(events);
  const bpfprof_process_mappings& m = f.sink.processes.at(Pid{50});
  EXPECT_EQ(m.count, static_cast<uint32_t>(BPFPROF_MAX_PROCESS_MAPPINGS));
  EXPECT_EQ(m.mappings[0].start, 0x7000000000u);
  EXPECT_EQ(f.tables.stats().processes_over_mapping_limit, 1u);
}

// A long recording with a churn of programs: the table of a file that no process maps any
// more gives its rows to the next table that needs them; a mapped file's never does.
TEST(KernelUnwindTables, TablesOfFilesNoLongerMappedMakeRoom) {
  Fixture f(/*capacity=*/25, /*table_rows=*/10);
  LoadSegment text;
  auto exit_of = [](Pid pid) {
    return LifecycleEvent{MonotonicNs{5}, ExitEvent{pid, Tid{pid.value}, CpuTimeNs{0}, 0, true}};
  };
  f.apply({start_event(Pid{60}), text_mapping(Pid{60}, 0x100000000, &text, "a"),
           start_event(Pid{61}), text_mapping(Pid{61}, 0x100000000, &text, "b")});
  f.apply({exit_of(Pid{60}), start_event(Pid{62}), text_mapping(Pid{62}, 0x100000000, &text, "c")});
  const bpfprof_process_mappings& c = f.sink.processes.at(Pid{62});
  ASSERT_EQ(c.count, 1u);
  EXPECT_EQ(c.mappings[0].kind, BPFPROF_MAPPING_TABLE);
  EXPECT_EQ(c.mappings[0].first_page, 0u);      // a's page
  EXPECT_EQ(f.sink.pages.at(0).first_row, 0u);  // and rows
  EXPECT_EQ(f.tables.stats().tables_evicted, 1u);
  EXPECT_EQ(f.tables.stats().rows_loaded, 20u);
  // b and c are mapped: d does not fit, and nothing of theirs is taken.
  f.apply({start_event(Pid{63}), text_mapping(Pid{63}, 0x100000000, &text, "d")});
  EXPECT_EQ(f.sink.processes.at(Pid{63}).mappings[0].kind, BPFPROF_MAPPING_FALLBACK);
  EXPECT_EQ(f.tables.stats().files_over_capacity, 1u);
  EXPECT_EQ(f.sink.processes.at(Pid{61}).mappings[0].kind, BPFPROF_MAPPING_TABLE);
  // a mapped again is loaded again (from the table builder's cache in a recording).
  f.apply({exit_of(Pid{61}), start_event(Pid{64}), text_mapping(Pid{64}, 0x100000000, &text, "a")});
  EXPECT_EQ(f.sink.processes.at(Pid{64}).mappings[0].kind, BPFPROF_MAPPING_TABLE);
}

// The row array grows a chunk at a time up to its bound; there, the tables of files no process
// maps give way one at a time, the least recently mapped first, and no more than needed.
TEST(KernelUnwindTables, GrowsToItsBoundThenEvictsTheLeastRecentlyMappedTable) {
  Fixture f(/*capacity=*/10, /*table_rows=*/10, false, 1, /*bound=*/30, /*chunk=*/10);
  LoadSegment text;
  auto exit_at = [](Pid pid, uint64_t time) {
    return LifecycleEvent{MonotonicNs{time}, ExitEvent{pid, Tid{pid.value}, CpuTimeNs{0}, 0, true}};
  };
  f.apply({start_event(Pid{70}), text_mapping(Pid{70}, 0x100000000, &text, "a"),
           start_event(Pid{71}), text_mapping(Pid{71}, 0x100000000, &text, "b"),
           start_event(Pid{72}), text_mapping(Pid{72}, 0x100000000, &text, "c")});
  EXPECT_EQ(f.sink.rows.size(), 30u);  // grew twice
  EXPECT_EQ(f.tables.stats().row_capacity, 30u);
  EXPECT_EQ(f.tables.stats().row_bound, 30u);
  EXPECT_EQ(f.tables.stats().tables_evicted, 0u);
  // b's process ends first, a's later: d takes b's rows, a's stay.
  f.apply({exit_at(Pid{71}, 5), exit_at(Pid{70}, 7), start_event(Pid{73}),
           text_mapping(Pid{73}, 0x100000000, &text, "d")});
  EXPECT_EQ(f.sink.processes.at(Pid{73}).mappings[0].kind, BPFPROF_MAPPING_TABLE);
  EXPECT_EQ(f.tables.stats().tables_evicted, 1u);
  EXPECT_EQ(f.sink.rows.size(), 30u);
  const int builds = f.builds;
  f.apply({start_event(Pid{74}), text_mapping(Pid{74}, 0x100000000, &text, "a")});
  EXPECT_EQ(f.sink.processes.at(Pid{74}).mappings[0].kind, BPFPROF_MAPPING_TABLE);
  EXPECT_EQ(f.builds, builds);  // still loaded: not built or read again
  f.apply({start_event(Pid{75}), text_mapping(Pid{75}, 0x100000000, &text, "b")});
  // Evicted, b is built again; a, c and d are mapped, so nothing gives way for it.
  EXPECT_EQ(f.builds, builds + 1);
  EXPECT_EQ(f.sink.processes.at(Pid{75}).mappings[0].kind, BPFPROF_MAPPING_FALLBACK);
  EXPECT_EQ(f.tables.stats().files_over_capacity, 1u);
}

TEST(RowRanges, FirstFitReuseAndMerging) {
  RowRanges rows(100);
  EXPECT_EQ(rows.allocate(30), 0u);
  EXPECT_EQ(rows.allocate(30), 30u);
  EXPECT_EQ(rows.allocate(30), 60u);
  EXPECT_FALSE(rows.allocate(11));
  rows.release(0, 30);
  rows.release(60, 30);  // joins the never-used end
  EXPECT_EQ(rows.in_use(), 30u);
  EXPECT_EQ(rows.allocate(40), 60u);  // from the end: the hole at 0 holds 30 only
  EXPECT_EQ(rows.allocate(25), 0u);   // first fit in the hole
  rows.release(30, 30);               // merges with the 5 rows left at 25
  EXPECT_EQ(rows.allocate(35), 25u);
  EXPECT_FALSE(rows.allocate(1));
  EXPECT_FALSE(rows.allocate(0));
  EXPECT_EQ(rows.in_use(), 100u);
}

// A process that maps a file with V8's symbols (the v8_blob fixture) has its anonymous JIT
// code found from its VMA and walked by frame pointers (BPFPROF_PROCESS_JIT_FRAME_POINTERS),
// and the recorder keeps reading the side band often for a while after it started; a process
// that maps no such file has none.
TEST(KernelUnwindTables, AProcessMappingV8IsMarkedForItsJitCode) {
  Fixture f;
  const std::string v8_blob = std::string(TEST_FIXTURE_DIR) + "/v8_blob";
  f.apply({start_event(Pid{20}), mapping_event(Pid{20}, 0x400000, 4096, 0, v8_blob, "v8"),
           mapping_event(Pid{20}, 0x7f0000000000, 4096, 0, "//anon", ""), start_event(Pid{21}),
           mapping_event(Pid{21}, 0x400000, 4096, 0, kBinary, "other")});
  ASSERT_TRUE(f.sink.processes.contains(Pid{20}) && f.sink.processes.contains(Pid{21}));
  EXPECT_EQ(f.sink.processes.at(Pid{20}).flags, uint32_t{BPFPROF_PROCESS_JIT_FRAME_POINTERS});
  EXPECT_EQ(f.sink.processes.at(Pid{21}).flags, 0u);
  EXPECT_TRUE(f.tables.settling(MonotonicNs{1 + KernelUnwindTables::kSettlingNs + 1}));
  EXPECT_FALSE(f.tables.settling(MonotonicNs{1 + KernelUnwindTables::kV8SettlingNs + 1}));
}

// On a cold cache the queue holds every file a machine maps; the files of stacks that fell
// back for want of their table are built first, innermost frame's first, each moved once.
TEST(KernelUnwindTables, BuildsTheTablesThatCopiedStacksNeededFirst) {
  std::mutex mutex;
  std::condition_variable released;
  bool release = false;
  std::vector<std::string> order;
  RecordingSink sink(1000);
  KernelUnwindTables tables(
      sink,
      [&](const std::string& path, OnCacheMiss) -> CachedUnwindTableResult {
        std::unique_lock lock(mutex);
        order.push_back(path);
        released.wait(lock, [&] { return release; });
        CachedUnwindTable table;
        table.rows = rows_of(10);
        return table;
      },
      false, 1);
  const Pid pid{10};
  std::vector<LifecycleEvent> events{start_event(pid)};
  for (const char* name : {"first", "second", "third", "fourth"}) {
    const uint64_t start = 0x1000000 * (events.size());
    events.push_back(mapping_event(pid, start, 0x10000, 0, std::string("/") + name, name));
  }
  tables.apply(events, 0);
  for (int i = 0; i < 1000; ++i) {  // the worker has taken the first job
    std::lock_guard lock(mutex);
    if (!order.empty()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  // A copied stack: fourth's code innermost, called from third's; then a pc in no mapping.
  tables.prefer(pid, {0x4000010, 0x3000010, 0x9000000});
  tables.prefer(pid, {0x2000010, 0x3000010});  // second's now too; third's already moved
  {
    std::lock_guard lock(mutex);
    release = true;
  }
  released.notify_all();
  ASSERT_TRUE(tables.wait_for_tables(std::chrono::seconds(30)));
  EXPECT_EQ(order, (std::vector<std::string>{"/first", "/second", "/fourth", "/third"}));
  EXPECT_EQ(tables.stats().tables_preferred, 3u);
}

}  // namespace
}  // namespace bpfprof
