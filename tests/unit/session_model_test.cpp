#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/unit/session_model_test_events.h"
#include "userspace/model/session_model.h"

namespace bpfprof {
namespace {

using namespace model_test;

TEST(AddressSpace, FindsTheMappingContainingAnAddress) {
  AddressSpace space;
  space.add(Mapping{0x1000, 0x2000, 0, LibId{1}});
  space.add(Mapping{0x3000, 0x5000, 0x1000, LibId{2}});
  EXPECT_EQ(space.find(0xfff), nullptr);
  ASSERT_NE(space.find(0x1000), nullptr);
  EXPECT_EQ(space.find(0x1fff)->lib, LibId{1});
  EXPECT_EQ(space.find(0x2000), nullptr);
  EXPECT_EQ(space.find(0x4abc)->lib, LibId{2});
}

TEST(AddressSpace, NewMappingReplacesTheOverlappedPart) {
  AddressSpace space;
  space.add(Mapping{0x1000, 0x9000, 0, LibId{1}});
  space.add(Mapping{0x3000, 0x4000, 0, LibId{2}});  // punches a hole in the middle
  EXPECT_EQ(space.size(), 3u);
  EXPECT_EQ(space.find(0x2fff)->lib, LibId{1});
  EXPECT_EQ(space.find(0x3000)->lib, LibId{2});
  const Mapping* tail = space.find(0x4000);
  ASSERT_NE(tail, nullptr);
  EXPECT_EQ(tail->lib, LibId{1});
  EXPECT_EQ(tail->file_offset, 0x3000u);         // the tail keeps its place in the file
  space.add(Mapping{0x0, 0xa000, 0, LibId{3}});  // covers everything
  EXPECT_EQ(space.size(), 1u);
}

// A runtime's rename with the whole name (Ruby's Thread#name) outlives the kernel's comm of
// its first 15 bytes (a rename, the exit); a comm that says something else renames.
TEST(SessionModel, AWholeThreadNameOutlivesItsCutComm) {
  SessionModel model;
  model.apply(ms(0), ProcessStartEvent{Pid{100}, "ruby", true});
  model.apply(ms(1), ForkEvent{Pid{100}, Tid{100}, Pid{100}, Tid{101}, "ruby"});
  model.apply(ms(2), CommEvent{Pid{100}, Tid{101}, "late picker of "});
  model.apply(ms(3), CommEvent{Pid{100}, Tid{101}, "late picker of the orchard"});
  model.apply(ms(4), CommEvent{Pid{100}, Tid{101}, "late picker of "});
  const Thread& thread = model.threads()[model.processes()[0].threads[1].value];
  EXPECT_EQ(thread.name, "late picker of the orchard");
  model.apply(ms(5), ExitEvent{Pid{100}, Tid{101}, CpuTimeNs{0}, 0, false, "late picker of "});
  EXPECT_EQ(model.threads()[model.processes()[0].threads[1].value].name,
            "late picker of the orchard");
  SessionModel other;
  other.apply(ms(0), ProcessStartEvent{Pid{100}, "ruby", true});
  other.apply(ms(1), ForkEvent{Pid{100}, Tid{100}, Pid{100}, Tid{101}, "ruby"});
  other.apply(ms(2), CommEvent{Pid{100}, Tid{101}, "late picker of the orchard"});
  other.apply(ms(3), CommEvent{Pid{100}, Tid{101}, "early picker"});
  EXPECT_EQ(other.threads()[other.processes()[0].threads[1].value].name, "early picker");
}

TEST(SessionModel, ForkExecExitMakeProcessEntriesOverTime) {
  SessionModel model;
  RawStackTree raw;
  model.apply(ms(0), ProcessStartEvent{Pid{100}, "launcher", true});
  model.apply(ms(1), AddressSpaceResetEvent{Pid{100}, Tid{100}});
  model.apply(ms(1), mmap_event(100, 0x400000, 0x1000, 0, "/bin/parent"));
  model.apply(ms(2), ExecEvent{Pid{100}, Tid{100}, Tid{100}, "parent", "/bin/parent"});
  model.apply(ms(3), ForkEvent{Pid{100}, Tid{100}, Pid{100}, Tid{101}, "worker"});
  model.apply(ms(4), ForkEvent{Pid{100}, Tid{100}, Pid{200}, Tid{200}, "parent"});
  model.apply(ms(5), CommEvent{Pid{100}, Tid{101}, "renamed"});
  model.apply(ms(6), AddressSpaceResetEvent{Pid{200}, Tid{200}});
  model.apply(ms(6), mmap_event(200, 0x400000, 0x1000, 0, "/bin/child"));
  model.apply(ms(7), ExecEvent{Pid{200}, Tid{200}, Tid{200}, "child", "/usr/bin/child"});
  model.add_sample(SampleRecord{ms(8), Pid{200}, Tid{200}, Cpu{0}, CpuTimeNs{5000000},
                                raw.intern(RawStackTree::kRoot, 0x400010)},
                   raw);
  model.apply(ms(9), ExitEvent{Pid{200}, Tid{200}, CpuTimeNs{6000000}, 0, true, "child"});
  model.finish(ms(1000));

  const auto& processes = model.processes();
  ASSERT_EQ(processes.size(), 4u);  // launcher, parent, child before exec, child after exec
  EXPECT_TRUE(processes[0].is_launcher);
  EXPECT_EQ(processes[1].name, "parent");
  EXPECT_EQ(processes[1].threads.size(), 2u);
  EXPECT_FALSE(processes[1].end.has_value());
  EXPECT_EQ(processes[2].pid, Pid{200});
  EXPECT_EQ(processes[2].name, "parent");  // a fork inherits the parent's name
  EXPECT_EQ(processes[2].end, ms(7));      // ended by the exec
  EXPECT_EQ(processes[3].name, "child");
  EXPECT_EQ(processes[3].executable, "/usr/bin/child");
  EXPECT_EQ(processes[3].start, ms(7));
  EXPECT_EQ(processes[3].end, ms(9));

  const Thread& worker = model.threads()[processes[1].threads[1].value];
  EXPECT_EQ(worker.name, "renamed");

  const Thread& child = model.threads()[processes[3].threads[0].value];
  ASSERT_EQ(child.samples.size(), 1u);
  EXPECT_EQ(child.samples[0].cpu_delta_ns,
            6000000u);  // all its runtime since the fork, to its exit
  EXPECT_EQ(child.final_cpu_time, CpuTimeNs{6000000});
  // The sample resolves against the child's own image, not the parent's.
  const auto& frame = model.stacks().node(child.samples[0].stack).key;
  EXPECT_EQ(model.library(frame.lib).path, "/bin/child");
  EXPECT_EQ(frame.address, 0x10u);
}

// A process's context comes after its exec (read from /proc then); its forks inherit it, an
// exec keeps it until its own is read, and one for a pid not running is dropped.
TEST(SessionModel, AContextFollowsItsProcessAndItsChildren) {
  SessionModel model;
  ProcessContext docker = context_from_cgroups("0::/docker/" + std::string(64, 'c') + "\n");
  ProcessContext service = context_from_cgroups("0::/system.slice/cron.service\n");
  model.apply(ms(0),
              ExistingProcessEvent{Pid{100}, "sh", "/bin/sh", {{Tid{100}, "sh", CpuTimeNs{0}}}});
  model.apply(ms(0), ProcessContextEvent{Pid{100}, docker});
  model.apply(ms(1), ForkEvent{Pid{100}, Tid{100}, Pid{200}, Tid{200}, "sh"});
  model.apply(ms(2), ExecEvent{Pid{200}, Tid{200}, Tid{200}, "go", "/bin/go"});
  model.apply(ms(3), ProcessContextEvent{Pid{300}, service});  // not running: no process made
  model.apply(ms(4), ExecEvent{Pid{100}, Tid{100}, Tid{100}, "cron", "/usr/sbin/cron"});
  model.apply(ms(4), ProcessContextEvent{Pid{100}, service});
  model.finish(ms(10));
  const auto& p = model.processes();
  ASSERT_EQ(p.size(), 4u);  // sh, its child before and after the exec, sh after its exec
  EXPECT_EQ(p[0].context, docker);
  EXPECT_EQ(p[1].context, docker);  // the fork
  EXPECT_EQ(p[2].context, docker);  // its exec, no context read for it
  EXPECT_EQ(p[3].name, "cron");
  EXPECT_EQ(p[3].context, service);
}

// After a period is written, what ended before it and holds nothing leaves the model; what
// is live, or still has samples, stays, renumbered, and later events still find it.
TEST(SessionModel, ForgettingEndedProcessesKeepsTheLiveOnesFindable) {
  SessionModel model;
  RawStackTree raw;
  auto sample = [&](uint64_t at, int pid, int tid) {
    model.add_sample(SampleRecord{ms(at), Pid{pid}, Tid{tid}, Cpu{0}, CpuTimeNs{at * 1000000},
                                  raw.intern(RawStackTree::kRoot, 0x400010)},
                     raw);
  };
  model.apply(ms(0), ProcessStartEvent{Pid{100}, "server", false});
  model.apply(ms(1), ForkEvent{Pid{100}, Tid{100}, Pid{100}, Tid{101}, "worker"});
  model.apply(ms(2), ForkEvent{Pid{100}, Tid{100}, Pid{200}, Tid{200}, "short"});
  model.apply(ms(3), ForkEvent{Pid{100}, Tid{100}, Pid{100}, Tid{102}, "helper"});
  sample(4, 200, 200);
  model.apply(ms(5), ExitEvent{Pid{200}, Tid{200}, CpuTimeNs{5000000}, 0, true, "short"});
  model.apply(ms(6), ExitEvent{Pid{100}, Tid{102}, CpuTimeNs{1000000}, 0, false, "helper"});
  model.apply(ms(7), ForkEvent{Pid{100}, Tid{100}, Pid{300}, Tid{300}, "late"});
  model.apply(ms(8), ExitEvent{Pid{300}, Tid{300}, CpuTimeNs{1000000}, 0, true, "late"});
  ASSERT_EQ(model.processes().size(), 3u);
  ASSERT_EQ(model.threads().size(), 5u);

  model.drop_samples_before(ms(7));  // the period up to 7 ms was written
  model.forget_ended_before(ms(7));
  // Left: the server (live) with its main thread and worker, and "late" (ended after 7 ms).
  ASSERT_EQ(model.processes().size(), 2u);
  EXPECT_EQ(model.processes()[0].pid, Pid{100});
  EXPECT_EQ(model.processes()[1].pid, Pid{300});
  ASSERT_EQ(model.threads().size(), 3u);
  ASSERT_EQ(model.processes()[0].threads.size(), 2u);
  for (ThreadIndex ti : model.processes()[0].threads)
    EXPECT_EQ(model.threads()[ti.value].process, ProcessIndex{0});
  EXPECT_EQ(model.threads()[model.processes()[1].threads[0].value].process, ProcessIndex{1});

  sample(9, 100, 101);  // the worker, renumbered, still gets its samples
  const Thread& worker = model.threads()[model.processes()[0].threads[1].value];
  EXPECT_EQ(worker.tid, Tid{101});
  EXPECT_EQ(worker.samples.size(), 1u);
  EXPECT_EQ(model.threads().size(), 3u);  // no new entry was made up for it
}

// The sampled kernel instruction and the user instruction where the thread entered the
// kernel (page fault, interrupt, syscall) are exact; only return addresses point into calls.
TEST(SessionModel, ReturnAddressesAreNudgedAndTheInnermostUserAndKernelFramesAreNot) {
  SessionModel model;
  RawStackTree raw;
  model.apply(ms(0), ProcessStartEvent{Pid{7}, "p", false});
  model.apply(ms(0), mmap_event(7, 0x1000, 0x1000, 0x2000, "/lib/x.so"));
  RawStackId leaf = raw.intern_path(std::vector<uint64_t>{0x1100, 0x1200, 0xffffffff81000010ull});
  model.add_sample(SampleRecord{ms(1), Pid{7}, Tid{7}, Cpu{0}, CpuTimeNs{1}, leaf}, raw);
  const Thread& t = model.threads()[0];
  ASSERT_EQ(t.samples.size(), 1u);
  std::vector<FrameKey> frames = model.stacks().leaf_to_root(t.samples[0].stack);
  ASSERT_EQ(frames.size(), 3u);
  EXPECT_EQ(frames[0], FrameKey::kernel(0xffffffff81000010ull));  // sampled ip
  EXPECT_EQ(frames[1].address, 0x1200u - 0x1000 + 0x2000);        // user instruction, exact
  EXPECT_EQ(frames[2].address, 0x1100u - 1 - 0x1000 + 0x2000);    // return address - 1

  // Without kernel frames the user leaf is the sampled instruction.
  RawStackId user_only = raw.intern_path(std::vector<uint64_t>{0x1100, 0x1200});
  model.add_sample(SampleRecord{ms(2), Pid{7}, Tid{7}, Cpu{0}, CpuTimeNs{2}, user_only}, raw);
  frames = model.stacks().leaf_to_root(model.threads()[0].samples.back().stack);
  ASSERT_EQ(frames.size(), 2u);
  EXPECT_EQ(frames[0].address, 0x1200u - 0x1000 + 0x2000);
  EXPECT_EQ(frames[1].address, 0x1100u - 1 - 0x1000 + 0x2000);
}

// record --memory: a page-fault sample is memory brought in at its stack (the thread's
// allocations, kPageFaultSampleBytes each), not CPU time: no sample row; dropped with the
// samples before a time.
TEST(SessionModel, APageFaultSampleIsAnAllocationNotASample) {
  SessionModel model;
  RawStackTree raw;
  model.apply(ms(0), ProcessStartEvent{Pid{7}, "p", false});
  model.apply(ms(0), mmap_event(7, 0x1000, 0x1000, 0x2000, "/lib/x.so"));
  RawStackId where = raw.intern_path(std::vector<uint64_t>{0x1100, 0x1200});
  model.add_sample(
      SampleRecord{ms(1), Pid{7}, Tid{7}, Cpu{0}, CpuTimeNs{1}, where, SampleKind::kPageFault},
      raw);
  model.add_sample(
      SampleRecord{ms(3), Pid{7}, Tid{7}, Cpu{0}, CpuTimeNs{1}, where, SampleKind::kPageFault},
      raw);
  const Thread& t = model.threads()[0];
  EXPECT_TRUE(t.samples.empty());
  ASSERT_EQ(t.allocations.size(), 2u);
  EXPECT_EQ(t.allocations[0].bytes, kPageFaultSampleBytes);
  EXPECT_EQ(t.allocations[1].time, ms(3));
  const std::vector<FrameKey> frames = model.stacks().leaf_to_root(t.allocations[0].stack);
  ASSERT_EQ(frames.size(), 2u);
  EXPECT_EQ(frames[0].address, 0x1200u - 0x1000 + 0x2000);  // the faulting instruction, exact
  model.drop_samples_before(ms(2));
  ASSERT_EQ(model.threads()[0].allocations.size(), 1u);
  EXPECT_EQ(model.threads()[0].allocations[0].time, ms(3));
}

// A model of process 7 for the memory tests, and a sampled call of one of its threads.
struct MemoryModel {
  explicit MemoryModel(Recording recording) {
    model.configure_for(recording);
    model.apply(ms(0), ProcessStartEvent{Pid{7}, "p", false});
  }
  SampleRecord call(uint64_t t, int32_t tid, SampleKind kind) {
    return SampleRecord{ms(t),  Pid{7},       Tid{tid},
                        Cpu{0}, CpuTimeNs{0}, raw.intern_path(std::vector<uint64_t>{0x1100}),
                        kind};
  }
  SessionModel model;
  RawStackTree raw;
};

Recording allocations_recording() {
  Recording recording;
  recording.allocation_period = 1024;
  return recording;
}

// record --allocations: a sampled realloc frees its old block and allocates a new one: two
// rows at its caller's stack, the free weighing what the block weighed when allocated.
TEST(SessionModel, ASampledReallocFreesOneBlockAndAllocatesAnother) {
  MemoryModel m(allocations_recording());
  SampleRecord call = m.call(1, 7, SampleKind::kAllocatorCall);
  call.allocator_call = {0xb000, 4096, 0xa000, 2048};
  m.model.add_sample(call, m.raw);
  const Thread& t = m.model.threads()[0];
  EXPECT_TRUE(t.samples.empty());
  ASSERT_EQ(t.allocations.size(), 2u);
  EXPECT_EQ(t.allocations[0].address, 0xa000u);
  EXPECT_EQ(t.allocations[0].bytes, -sampled_block_weight(2048, 1024));
  EXPECT_EQ(t.allocations[1].address, 0xb000u);
  EXPECT_EQ(t.allocations[1].bytes, sampled_block_weight(4096, 1024));
  EXPECT_EQ(t.allocations[1].stack, t.allocations[0].stack);
}

// A block freed by another thread than the one that allocated it: the free is in the
// allocating thread's table (the front end matches frees within a table), saying who freed it.
TEST(SessionModel, AFreeOnAnotherThreadGoesInTheAllocatingThreadsTable) {
  MemoryModel m(allocations_recording());
  m.model.apply(ms(0), ForkEvent{Pid{7}, Tid{7}, Pid{7}, Tid{8}, "keeper"});
  auto call = [&](uint64_t t, int32_t tid, AllocatorCall what) {
    SampleRecord sample = m.call(t, tid, SampleKind::kAllocatorCall);
    sample.allocator_call = what;
    m.model.add_sample(sample, m.raw);
  };
  call(1, 8, {0xa000, 4096, 0, 0});
  call(2, 7, {0, 0, 0xa000, 4096});
  call(3, 7, {0, 0, 0xb000, 4096});  // a block not seen allocated: the freeing thread's
  const Thread& main_thread = m.model.threads()[0];
  const Thread& keeper = m.model.threads()[1];
  ASSERT_EQ(keeper.tid, Tid{8});
  ASSERT_EQ(keeper.allocations.size(), 2u);
  EXPECT_EQ(keeper.allocations[1].bytes, -keeper.allocations[0].bytes);
  EXPECT_EQ(keeper.allocations[1].by_thread, Tid{7});
  EXPECT_FALSE(keeper.allocations[0].by_thread);
  ASSERT_EQ(main_thread.allocations.size(), 1u);
  EXPECT_EQ(main_thread.allocations[0].address, 0xb000u);
  EXPECT_FALSE(main_thread.allocations[0].by_thread);
}

// A sampled munmap shrinks the address space by what it stands for: the same weight as a
// mapping of its size, negative; neither is a sample of time nor a native allocation.
TEST(SessionModel, ASampledUnmapStandsForItsSizeNegative) {
  Recording recording;
  recording.record_memory = true;
  MemoryModel m(recording);
  for (const int64_t change : {int64_t{3} << 20, -(int64_t{3} << 20)}) {
    SampleRecord call = m.call(1, 7, SampleKind::kAddressSpaceCall);
    call.address_space_call = {
        change > 0 ? AddressSpaceCallKind::kMmap : AddressSpaceCallKind::kMunmap, 0x7000, change};
    m.model.add_sample(call, m.raw);
  }
  const Thread& t = m.model.threads()[0];
  EXPECT_TRUE(t.samples.empty());
  EXPECT_TRUE(t.allocations.empty());
  ASSERT_EQ(t.address_space_calls.size(), 2u);
  const int64_t weight = sampled_block_weight(3u << 20, BPFPROF_ADDRESS_SPACE_PERIOD);
  EXPECT_GT(weight, int64_t{3} << 20);
  EXPECT_EQ(t.address_space_calls[0].sampled_bytes, weight);
  EXPECT_EQ(t.address_space_calls[1].sampled_bytes, -weight);
  EXPECT_EQ(t.address_space_calls[1].what.call, AddressSpaceCallKind::kMunmap);
  EXPECT_NE(t.address_space_calls[0].stack, ResolvedStackTree::kRoot);
}

// Callers are resolved once per raw stack and kept: a new mapping over their addresses (a
// library replaced by dlopen) resolves them again; a stack of kernel frames only nudges all
// but its leaf.
TEST(SessionModel, CallersResolvedBeforeFollowTheAddressSpace) {
  SessionModel model;
  RawStackTree raw;
  model.apply(ms(0), ProcessStartEvent{Pid{7}, "p", false});
  model.apply(ms(0), mmap_event(7, 0x1000, 0x1000, 0x2000, "/lib/x.so"));
  const RawStackId first = raw.intern_path(std::vector<uint64_t>{0x1100, 0x1180, 0x1200});
  model.add_sample(SampleRecord{ms(1), Pid{7}, Tid{7}, Cpu{0}, CpuTimeNs{1}, first}, raw);
  model.apply(ms(2), mmap_event(7, 0x1000, 0x1000, 0x5000, "/lib/y.so"));
  const RawStackId second = raw.intern_path(std::vector<uint64_t>{0x1100, 0x1180, 0x1210});
  model.add_sample(SampleRecord{ms(3), Pid{7}, Tid{7}, Cpu{0}, CpuTimeNs{2}, second}, raw);
  const auto& samples = model.threads()[0].samples;
  ASSERT_EQ(samples.size(), 2u);
  const std::vector<FrameKey> before = model.stacks().leaf_to_root(samples[0].stack);
  const std::vector<FrameKey> after = model.stacks().leaf_to_root(samples[1].stack);
  ASSERT_EQ(before.size(), 3u);
  ASSERT_EQ(after.size(), 3u);
  EXPECT_EQ(before[2].address, 0x1100u - 1 - 0x1000 + 0x2000);
  EXPECT_EQ(after[0].address, 0x1210u - 0x1000 + 0x5000);
  EXPECT_EQ(after[1].address, 0x1180u - 1 - 0x1000 + 0x5000);
  EXPECT_EQ(after[2].address, 0x1100u - 1 - 0x1000 + 0x5000);
  EXPECT_NE(after[2].lib, before[2].lib);

  const RawStackId kernel_only =
      raw.intern_path(std::vector<uint64_t>{0xffffffff81000100ull, 0xffffffff81000200ull});
  model.add_sample(SampleRecord{ms(4), Pid{7}, Tid{7}, Cpu{0}, CpuTimeNs{3}, kernel_only}, raw);
  const std::vector<FrameKey> kernel = model.stacks().leaf_to_root(samples.back().stack);
  ASSERT_EQ(kernel.size(), 2u);
  EXPECT_EQ(kernel[0], FrameKey::kernel(0xffffffff81000200ull));
  EXPECT_EQ(kernel[1], FrameKey::kernel(0xffffffff81000100ull - 1));
}

// A library mapped by a process found at attach (/proc snapshot: device and inode, build-id
// added by MappedFiles) and by a later process (MMAP2: build-id, no device or inode) is one
// library; the same path with another build-id (replaced on disk) is another.
TEST(SessionModel, OneLibraryPerFileWhetherSeenInASnapshotOrAnMmapRecord) {
  SessionModel model;
  RawStackTree raw;
  model.apply(ms(0), ProcessStartEvent{Pid{7}, "old", false});
  model.apply(ms(0), ProcessStartEvent{Pid{8}, "new", false});
  model.apply(ms(0), ProcessStartEvent{Pid{9}, "newer", false});
  MmapEvent snapshot = mmap_event(7, 0x1000, 0x1000, 0, "/lib/liblzma.so.5");
  snapshot.mapping.dev_major = 8;
  snapshot.mapping.inode = 1234;
  snapshot.mapping.build_id = "\x01\x02";
  MmapEvent record = mmap_event(8, 0x5000, 0x1000, 0, "/lib/liblzma.so.5");
  record.mapping.build_id = "\x01\x02";
  MmapEvent replaced = mmap_event(9, 0x5000, 0x1000, 0, "/lib/liblzma.so.5");
  replaced.mapping.build_id = "\x03\x04";
  for (const MmapEvent& e : {snapshot, record, replaced}) model.apply(ms(0), e);
  auto lib_of_sample = [&](int pid, uint64_t address) {
    model.add_sample(SampleRecord{ms(1), Pid{pid}, Tid{pid}, Cpu{0}, CpuTimeNs{1},
                                  raw.intern_path(std::vector<uint64_t>{address})},
                     raw);
    for (const Thread& t : model.threads())
      if (t.tid == Tid{pid}) return model.stacks().leaf_to_root(t.samples.back().stack)[0].lib;
    throw std::runtime_error("no thread");
  };
  EXPECT_EQ(lib_of_sample(7, 0x1100), lib_of_sample(8, 0x5100));
  EXPECT_NE(lib_of_sample(8, 0x5100), lib_of_sample(9, 0x5100));
}

TEST(SessionModel, CpuDeltasFollowTheKernelRuntime) {
  SessionModel model;
  model.set_collapse_repeated_samples(false);  // one sample per tick, to see each delta
  RawStackTree raw;
  model.apply(ms(0), ForkEvent{Pid{1}, Tid{1}, Pid{1}, Tid{2}, "t"});
  for (uint64_t i = 1; i <= 3; ++i)
    model.add_sample(
        SampleRecord{ms(i), Pid{1}, Tid{2}, Cpu{0}, CpuTimeNs{i * 700000}, RawStackTree::kRoot},
        raw);
  model.finish(ms(1000));
  const Thread& t = thread_with_tid(model, 2);
  ASSERT_EQ(t.samples.size(), 3u);
  for (const ThreadSample& s : t.samples) EXPECT_EQ(s.cpu_delta_ns, 700000u);
}

TEST(SessionModel, TickLumpsAreSpreadOverSamplesWithoutLosingTime) {
  // The runtime moves only every 4th sample (a 4 ms tick at 1 kHz sampling).
  SessionModel model;
  model.set_collapse_repeated_samples(false);
  RawStackTree raw;
  model.apply(ms(0), ForkEvent{Pid{1}, Tid{1}, Pid{1}, Tid{2}, "t"});
  for (uint64_t i = 1; i <= 12; ++i) {
    uint64_t runtime = (i / 4) * 4000000;
    model.add_sample(
        SampleRecord{ms(i), Pid{1}, Tid{2}, Cpu{0}, CpuTimeNs{runtime}, RawStackTree::kRoot}, raw);
  }
  model.apply(ms(13), ExitEvent{Pid{1}, Tid{2}, CpuTimeNs{13000000}, 0, false, "t"});
  model.finish(ms(1000));
  const Thread& t = thread_with_tid(model, 2);
  uint64_t total = 0;
  for (size_t i = 0; i < t.samples.size(); ++i) {
    total += t.samples[i].cpu_delta_ns;
    if (i + 1 < t.samples.size()) {
      EXPECT_LE(t.samples[i].cpu_delta_ns, 1000000u) << i;  // never > 100%
    }
  }
  EXPECT_EQ(total, 13000000u);                     // all of the kernel's runtime, up to the exit
  EXPECT_EQ(t.samples[5].cpu_delta_ns, 1000000u);  // smooth once the first tick has landed
}

TEST(SessionModel, SamplesOnTheWayOutStayWithTheExitedThread) {
  SessionModel model;
  RawStackTree raw;
  model.apply(ms(0), ForkEvent{Pid{1}, Tid{1}, Pid{50}, Tid{50}, "short"});
  model.add_sample(
      SampleRecord{ms(1), Pid{50}, Tid{50}, Cpu{0}, CpuTimeNs{100}, RawStackTree::kRoot}, raw);
  model.apply(ms(2), ExitEvent{Pid{50}, Tid{50}, CpuTimeNs{300}, 0, true, "short"});
  model.add_sample(
      SampleRecord{ms(3), Pid{50}, Tid{50}, Cpu{0}, CpuTimeNs{350}, RawStackTree::kRoot}, raw);
  size_t entries_for_50 = 0;
  for (const Process& p : model.processes()) entries_for_50 += p.pid == Pid{50} ? 1 : 0;
  EXPECT_EQ(entries_for_50, 1u);
  // A later process that reuses the pid is a new entry.
  model.apply(ms(4), ForkEvent{Pid{1}, Tid{1}, Pid{50}, Tid{50}, "reused"});
  model.add_sample(
      SampleRecord{ms(5), Pid{50}, Tid{50}, Cpu{0}, CpuTimeNs{10}, RawStackTree::kRoot}, raw);
  entries_for_50 = 0;
  for (const Process& p : model.processes()) entries_for_50 += p.pid == Pid{50} ? 1 : 0;
  EXPECT_EQ(entries_for_50, 2u);
  EXPECT_EQ(model.threads().back().name, "reused");
  EXPECT_EQ(model.threads().back().samples.size(), 1u);
}

// A process's last task samples after the exit tracepoint too (inside do_exit, its mappings
// still in place): its frames resolve in the mappings it had, not as unmapped addresses. A
// later process with the same pid starts from its own.
TEST(SessionModel, SamplesOnTheWayOutResolveInTheExitedProcessesMappings) {
  SessionModel model;
  RawStackTree raw;
  model.apply(ms(0), ForkEvent{Pid{1}, Tid{1}, Pid{50}, Tid{50}, "short"});
  model.apply(ms(0), mmap_event(50, 0x1000, 0x1000, 0x2000, "/lib/x.so"));
  model.apply(ms(2), ExitEvent{Pid{50}, Tid{50}, CpuTimeNs{300}, 0, true, "short"});
  const RawStackId stack = raw.intern_path(std::vector<uint64_t>{0x1100, 0x1200});
  model.add_sample(SampleRecord{ms(3), Pid{50}, Tid{50}, Cpu{0}, CpuTimeNs{350}, stack}, raw);
  const std::vector<FrameKey> frames =
      model.stacks().leaf_to_root(model.threads().back().samples.back().stack);
  ASSERT_EQ(frames.size(), 2u);
  EXPECT_EQ(frames[0].kind, FrameKind::kNative);
  EXPECT_EQ(frames[0].address, 0x1200u - 0x1000 + 0x2000);
  EXPECT_EQ(frames[1].kind, FrameKind::kNative);

  model.apply(ms(4), ForkEvent{Pid{1}, Tid{1}, Pid{50}, Tid{50}, "reused"});
  model.add_sample(SampleRecord{ms(5), Pid{50}, Tid{50}, Cpu{0}, CpuTimeNs{10}, stack}, raw);
  const std::vector<FrameKey> reused =
      model.stacks().leaf_to_root(model.threads().back().samples.back().stack);
  ASSERT_EQ(reused.size(), 2u);
  EXPECT_EQ(reused[0].kind, FrameKind::kUnmapped);
}

TEST(SessionModel, TheLaunchedCommandsCpuIsCountedFromItsFork) {
  SessionModel model;
  RawStackTree raw;
  model.apply(ms(0), ProcessStartEvent{Pid{9}, "cmd", true});
  // A sample of the launcher before its exec: left out of the profile, its CPU is not.
  model.add_sample(SampleRecord{MonotonicNs{500000}, Pid{9}, Tid{9}, Cpu{0}, CpuTimeNs{400000},
                                RawStackTree::kRoot},
                   raw);
  model.apply(ms(1), ExecEvent{Pid{9}, Tid{9}, Tid{9}, "cmd", "/bin/cmd"});
  model.add_sample(
      SampleRecord{ms(5), Pid{9}, Tid{9}, Cpu{0}, CpuTimeNs{3000000}, RawStackTree::kRoot}, raw);
  model.finish(ms(10));
  EXPECT_EQ(thread_with_tid(model, 9).samples.at(0).cpu_delta_ns, 3000000u);
}

// -a and -p: an event of a pid that comes before the /proc snapshot of that pid (a wakeup
// whose wait began before the recording) makes up an entry; the snapshot names it instead
// of starting a second process with the same threads.
TEST(SessionModel, ASnapshotAdoptsTheEntryEarlierEventsMadeUp) {
  Recording rec;
  rec.frequency_hz = 1000;
  rec.samples.push_back(
      SampleRecord{ms(1), Pid{7}, Tid{8}, Cpu{0}, CpuTimeNs{1000000},
                   rec.raw_stacks.intern(RawStackTree::kRoot, 0xffffffff81000000ull)});
  rec.events.push_back(LifecycleEvent{
      ms(2),
      ExistingProcessEvent{Pid{7},
                           "server",
                           "/usr/bin/server",
                           {{Tid{7}, "server", CpuTimeNs{5}}, {Tid{8}, "worker", CpuTimeNs{6}}}}});
  SessionModel model;
  model.replay(rec);
  ASSERT_EQ(model.processes().size(), 1u);
  EXPECT_EQ(model.processes()[0].name, "server");
  EXPECT_EQ(model.processes()[0].threads.size(), 2u);
  EXPECT_EQ(thread_with_tid(model, 8).name, "worker");
  EXPECT_EQ(thread_with_tid(model, 8).samples.size(), 1u);
}

}  // namespace
}  // namespace bpfprof
