#include "userspace/capture/memory_limit.h"

#include <gtest/gtest.h>

namespace bpfprof {
namespace {

TEST(MemoryCgroupOf, FindsTheV1MemoryControllerAmongOthers) {
  const auto membership =
      memory_cgroup_of("9:name=systemd:/\n8:pids:/\n4:cpu,memory:/ci/job:7\n1:cpu:/\n0::/\n");
  ASSERT_TRUE(membership);
  EXPECT_EQ(membership->version, CgroupVersion::kV1);
  EXPECT_EQ(membership->path, "/ci/job:7");  // a ':' in the path is kept
}

TEST(MemoryCgroupOf, UsesTheUnifiedHierarchyWithoutAV1MemoryController) {
  const auto membership = memory_cgroup_of("0::/user.slice/session-3.scope\n");
  ASSERT_TRUE(membership);
  EXPECT_EQ(membership->version, CgroupVersion::kV2);
  EXPECT_EQ(membership->path, "/user.slice/session-3.scope");
}

TEST(MemoryCgroupOf, NothingFromTextWithoutAMemoryCgroup) {
  EXPECT_FALSE(memory_cgroup_of(""));
  EXPECT_FALSE(memory_cgroup_of("3:cpu:/a\ngarbage\n1:pids\n"));
}

TEST(MemoryHierarchyMount, FindsEachVersionsMountPoint) {
  const char* mounts =
      "tmpfs /sys/fs/cgroup tmpfs rw 0 0\n"
      "cgroup /sys/fs/cgroup/cpu cgroup rw,relatime,cpu 0 0\n"
      "cgroup /sys/fs/cgroup/memory cgroup rw,relatime,memory 0 0\n"
      "cgroup2 /sys/fs/cgroup/unified cgroup2 rw,nsdelegate 0 0\n";
  EXPECT_EQ(memory_hierarchy_mount(mounts, CgroupVersion::kV1), "/sys/fs/cgroup/memory");
  EXPECT_EQ(memory_hierarchy_mount(mounts, CgroupVersion::kV2), "/sys/fs/cgroup/unified");
  EXPECT_FALSE(memory_hierarchy_mount("proc /proc proc rw 0 0\n", CgroupVersion::kV1));
}

TEST(MemoryStatValue, ReadsTheExactKey) {
  const char* stat = "active_file 4096\ntotal_active_file 8192\ninactive_file 12\nbad x\n";
  EXPECT_EQ(memory_stat_value(stat, "active_file"), 4096u);
  EXPECT_EQ(memory_stat_value(stat, "total_active_file"), 8192u);
  EXPECT_FALSE(memory_stat_value(stat, "file"));
  EXPECT_FALSE(memory_stat_value(stat, "bad"));
}

}  // namespace
}  // namespace bpfprof
