// Per-process stack copy sizes (DWARF mode): raised for a process whose stacks are cut at
// the copy's end, learnt per executable, kept across fork, forgotten at exit.
#include <gtest/gtest.h>

#include "userspace/capture/stack_copy_sizer.h"

namespace bpfprof {
namespace {

using Changes = std::vector<std::pair<Pid, uint32_t>>;

TEST(StackCopySizer, RaisesToTwiceWhatTheUnwinderNeededUpToTheLargest) {
  StackCopySizer sizer(8192, 65528);
  sizer.observe(Pid{1}, 0, 8192);  // not cut: nothing changes
  EXPECT_TRUE(sizer.take_changes().empty());
  sizer.observe(Pid{1}, 9000, 8192);  // a 9 KB frame: 16 KB is not twice that
  EXPECT_EQ(sizer.take_changes(), (Changes{{Pid{1}, 32768}}));
  // Samples still in flight, copied with the old size, change nothing.
  sizer.observe(Pid{1}, 9000, 8192);
  EXPECT_TRUE(sizer.take_changes().empty());
  sizer.observe(Pid{1}, 40000, 32768);
  EXPECT_EQ(sizer.take_changes(), (Changes{{Pid{1}, 65528}}));
  sizer.observe(Pid{1}, 70000, 65528);  // the largest stays the largest
  EXPECT_TRUE(sizer.take_changes().empty());
  EXPECT_EQ(sizer.bytes_for(Pid{2}), 8192u);
}

TEST(StackCopySizer, LaterProcessesOfAnExecutableStartWithWhatItNeeded) {
  StackCopySizer sizer(8192, 65528);
  sizer.on_exec(Pid{1}, "/usr/bin/git");
  sizer.observe(Pid{1}, 12000, 8192);
  sizer.take_changes();
  sizer.on_fork(Pid{1}, Pid{2});  // the child runs the same code until it execs
  EXPECT_EQ(sizer.take_changes(), (Changes{{Pid{2}, 32768}}));
  sizer.on_exec(Pid{2}, "/usr/bin/cat");  // another program: back to the configured size
  EXPECT_EQ(sizer.take_changes(), (Changes{{Pid{2}, 8192}}));
  sizer.on_exec(Pid{3}, "/usr/bin/git");
  EXPECT_EQ(sizer.take_changes(), (Changes{{Pid{3}, 32768}}));
  sizer.on_exit(Pid{3});  // its pid may be reused by anything
  EXPECT_EQ(sizer.take_changes(), (Changes{{Pid{3}, 8192}}));
  sizer.on_exit(Pid{4});
  EXPECT_TRUE(sizer.take_changes().empty());
}

// The kernel gives an exec the size learnt for its file at once: every file of the program,
// once learnt and again when it grows.
TEST(StackCopySizer, FilesOfAProgramGetItsLearntSizeForTheKernel) {
  StackCopySizer sizer(8192, 65528);
  const bpfprof_file_key bin_git{0x800001, 11}, core_git{0x800001, 12};
  using FileChanges = std::vector<std::pair<bpfprof_file_key, uint32_t>>;
  auto same = [](const FileChanges& a, const FileChanges& b) {
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](auto& x, auto& y) {
             return same_file(x.first, y.first) && x.second == y.second;
           });
  };
  sizer.on_exec(Pid{1}, "build-id 01", bin_git);
  EXPECT_TRUE(sizer.take_file_changes().empty());  // nothing learnt yet
  sizer.observe(Pid{1}, 12000, 8192);
  EXPECT_TRUE(same(sizer.take_file_changes(), {{bin_git, 32768}}));
  sizer.on_exec(Pid{2}, "build-id 01", core_git);  // the same build at another path
  EXPECT_TRUE(same(sizer.take_file_changes(), {{core_git, 32768}}));
  sizer.on_exec(Pid{3}, "build-id 01", bin_git);  // known: no change
  EXPECT_TRUE(sizer.take_file_changes().empty());
  sizer.take_changes();
  sizer.observe(Pid{3}, 40000, 32768);
  EXPECT_TRUE(same(sizer.take_file_changes(), {{bin_git, 65528}, {core_git, 65528}}));
  sizer.on_exec(Pid{4}, "/usr/bin/cat");  // a file that could not be read: nothing for the kernel
  EXPECT_TRUE(sizer.take_file_changes().empty());
}

}  // namespace
}  // namespace bpfprof
