// runtimes/kit/process_tracker.h: which recorded processes map a runtime's files, whatever the
// order in which their mappings and their fork, exec or exit are read.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "runtimes/kit/process_tracker.h"

namespace bpfprof {
namespace {

LifecycleEvent mmap_of(int pid, const std::string& path, uint64_t time = 0) {
  MappingInfo mapping;
  mapping.path = path;
  return {MonotonicNs{time}, MmapEvent{Pid{pid}, Tid{pid}, mapping}};
}
LifecycleEvent fork_of(int parent, int child, uint64_t time = 0) {
  return {MonotonicNs{time}, ForkEvent{Pid{parent}, Tid{parent}, Pid{child}, Tid{child}}};
}
LifecycleEvent exec_of(int pid, uint64_t time = 0) {
  return {MonotonicNs{time}, AddressSpaceResetEvent{Pid{pid}, Tid{pid}}};
}
LifecycleEvent exit_of(int pid) {
  return {MonotonicNs{0}, ExitEvent{Pid{pid}, Tid{pid}, CpuTimeNs{0}, 0, true}};
}

struct TrackerSeen {
  std::vector<std::pair<int, std::string>> mapped;
  std::vector<int> execs;
};

class TrackerTest : public ::testing::Test {
 protected:
  void observe(const std::vector<LifecycleEvent>& events) {
    tracker_.observe(
        events, 0,
        [&](Pid pid, const MappingInfo& m) { seen_.mapped.emplace_back(pid.value, m.path); },
        [&](Pid pid) { seen_.execs.push_back(pid.value); });
  }
  RuntimeProcessTracker tracker_{[](const std::string& base) {
    return base.starts_with("python3") || base.starts_with("libpython3");
  }};
  TrackerSeen seen_;
};

TEST_F(TrackerTest, AShellsChildsMappingsReadBeforeItsForkAllCountOnceItIsKnown) {
  observe({mmap_of(7, "/usr/bin/python3.12"), mmap_of(7, "/usr/lib/libc.so.6"),
           mmap_of(7, "/usr/lib/libpython3.12.so.1.0"), fork_of(1, 7)});
  const std::vector<std::pair<int, std::string>> want{{7, "/usr/bin/python3.12"},
                                                      {7, "/usr/lib/libpython3.12.so.1.0"}};
  EXPECT_EQ(seen_.mapped, want);
}

TEST_F(TrackerTest, AKnownProcessesMappingsCountAtOnceAndOthersNever) {
  observe({fork_of(1, 7), mmap_of(7, "/usr/bin/python3.11"), mmap_of(8, "/usr/bin/python3.11")});
  const std::vector<std::pair<int, std::string>> want{{7, "/usr/bin/python3.11"}};
  EXPECT_EQ(seen_.mapped, want);
}

TEST_F(TrackerTest, AnExecDropsWhatWaitedAndIsSaid) {
  observe({mmap_of(7, "/usr/bin/python3.11"), exec_of(7), fork_of(1, 7)});
  EXPECT_TRUE(seen_.mapped.empty());
  EXPECT_EQ(seen_.execs, std::vector<int>{7});
}

// The side band's rings are read one after another: a JVM's exec can be read after the
// library it mapped on another CPU. The mapping dated after the exec is the new image's.
TEST_F(TrackerTest, AnExecReadAfterANewerMappingKeepsIt) {
  observe({fork_of(1, 7, 10), mmap_of(7, "/usr/bin/python3.11", 100),
           mmap_of(7, "/usr/lib/libpython3.11.so", 300), exec_of(7, 200)});
  const std::vector<std::pair<int, std::string>> want{{7, "/usr/bin/python3.11"},
                                                      {7, "/usr/lib/libpython3.11.so"},
                                                      {7, "/usr/lib/libpython3.11.so"}};
  EXPECT_EQ(seen_.mapped, want);  // the newer one again, after the exec the runtime was told of
  EXPECT_EQ(seen_.execs, std::vector<int>{7});
  seen_.mapped.clear();
  observe({fork_of(7, 8, 400)});  // a child inherits only the new image's
  EXPECT_EQ(seen_.mapped,
            (std::vector<std::pair<int, std::string>>{{8, "/usr/lib/libpython3.11.so"}}));
}

TEST_F(TrackerTest, AnExecReadAfterANewerMappingOfAProcessNotKnownYetKeepsIt) {
  observe({mmap_of(7, "/usr/bin/python3.11", 100), mmap_of(7, "/usr/lib/libpython3.11.so", 300),
           exec_of(7, 200), fork_of(1, 7, 10)});
  const std::vector<std::pair<int, std::string>> want{{7, "/usr/lib/libpython3.11.so"}};
  EXPECT_EQ(seen_.mapped, want);
}

TEST_F(TrackerTest, AnExitedProcessIsForgottenWhenTaken) {
  observe({fork_of(1, 7), exit_of(7)});
  EXPECT_EQ(tracker_.take_exited(), std::vector<Pid>{Pid{7}});
  EXPECT_TRUE(tracker_.take_exited().empty());
  observe({mmap_of(7, "/usr/bin/python3.11")});  // a new process under the same pid
  EXPECT_TRUE(seen_.mapped.empty());
}

TEST_F(TrackerTest, TheMappingsWaitingForOneProcessAreBounded) {
  std::vector<LifecycleEvent> events;
  for (int i = 0; i < 100; ++i) events.push_back(mmap_of(7, "/x/libpython3." + std::to_string(i)));
  events.push_back(fork_of(1, 7));
  observe(events);
  EXPECT_EQ(seen_.mapped.size(), RuntimeProcessTracker::kMaxPendingMappings);
}

// A multiprocessing worker or a zygote's renderer maps nothing: it runs what its parent mapped.
TEST_F(TrackerTest, AForkedChildRunsItsParentsRuntime) {
  observe({fork_of(1, 7, 1), mmap_of(7, "/usr/bin/python3.11", 2),
           mmap_of(7, "/usr/lib/libc.so.6", 3), fork_of(7, 8, 4), fork_of(8, 9, 5)});
  const std::vector<std::pair<int, std::string>> want{
      {7, "/usr/bin/python3.11"}, {8, "/usr/bin/python3.11"}, {9, "/usr/bin/python3.11"}};
  EXPECT_EQ(seen_.mapped, want);
}

// The side band may be read after the fork: what the parent mapped before the fork counts for
// the child, what it mapped after does not.
TEST_F(TrackerTest, AParentsMappingReadAfterAForkCountsForTheChildIfMadeBeforeIt) {
  observe({fork_of(1, 7, 1), fork_of(7, 8, 5), mmap_of(7, "/usr/bin/python3.11", 3),
           mmap_of(7, "/usr/lib/libpython3.11.so", 6)});
  const std::vector<std::pair<int, std::string>> want{
      {7, "/usr/bin/python3.11"}, {8, "/usr/bin/python3.11"}, {7, "/usr/lib/libpython3.11.so"}};
  EXPECT_EQ(seen_.mapped, want);
}

// A child that execs another program leaves its parent's runtime; one whose own image's
// mappings came before its fork keeps them, not its parent's.
TEST_F(TrackerTest, AChildsOwnImageIsNotItsParents) {
  observe({fork_of(1, 7, 1), mmap_of(7, "/usr/bin/python3.11", 2),
           mmap_of(8, "/usr/bin/python3.12", 3), fork_of(7, 8, 3), fork_of(7, 9, 4), exec_of(9, 5),
           mmap_of(7, "/usr/bin/python3.11.x", 3)});
  const std::vector<std::pair<int, std::string>> want{{7, "/usr/bin/python3.11"},
                                                      {8, "/usr/bin/python3.12"},
                                                      {9, "/usr/bin/python3.11"},
                                                      {7, "/usr/bin/python3.11.x"}};
  EXPECT_EQ(seen_.mapped, want);
  EXPECT_EQ(seen_.execs, std::vector<int>{9});
}

}  // namespace
}  // namespace bpfprof
