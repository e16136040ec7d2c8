// record --cgroup: the cgroup mounts of a mountinfo text, a path resolved to its hierarchy,
// and which processes' /proc/PID/cgroup puts them inside.
#include "userspace/session/cgroup_targets.h"

#include <gtest/gtest.h>

#include <stdexcept>

namespace bpfprof {
namespace {

// A hybrid host's mountinfo (this machine kind's): v1 controllers and a named hierarchy,
// the v2 tree under unified/.
constexpr const char* kHybrid =
    "30 24 0:26 / /sys/fs/cgroup ro,nosuid - tmpfs tmpfs ro,mode=755\n"
    "31 30 0:27 / /sys/fs/cgroup/unified rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n"
    "32 30 0:28 / /sys/fs/cgroup/systemd rw,nosuid - cgroup cgroup rw,xattr,name=systemd\n"
    "35 30 0:31 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid shared:15 - cgroup cgroup rw,cpu,cpuacct\n"
    "36 30 0:32 / /sys/fs/cgroup/memory rw,nosuid - cgroup cgroup rw,memory\n"
    "40 24 0:36 / /proc rw - proc proc rw\n";

TEST(CgroupTargets, MountsOfEachKind) {
  const std::vector<CgroupMount> mounts = cgroup_mounts(kHybrid);
  ASSERT_EQ(mounts.size(), 4u);
  EXPECT_EQ(mounts[0].mount_point, "/sys/fs/cgroup/unified");
  EXPECT_TRUE(mounts[0].v2);
  EXPECT_EQ(mounts[1].mount_point, "/sys/fs/cgroup/systemd");
  EXPECT_TRUE(mounts[1].controllers.empty());  // named: no controller
  EXPECT_EQ(mounts[2].controllers, (std::vector<std::string>{"cpu", "cpuacct"}));
  EXPECT_EQ(mounts[3].controllers, (std::vector<std::string>{"memory"}));
  EXPECT_TRUE(cgroup_mounts("garbage\n - \n1 2 3\n").empty());
}

CgroupTarget target(bool v2, std::string controller, std::string path) {
  CgroupTarget t;
  t.v2 = v2;
  t.controller = std::move(controller);
  t.path = std::move(path);
  return t;
}

TEST(CgroupTargets, ASubtreeHoldsItsCgroupAndThoseBelow) {
  const std::string docker = "/docker/4f1c0ed7c1c6e4f9";
  const CgroupTarget cpu = target(false, "cpu", docker);
  EXPECT_TRUE(cgroup_contains(cpu, "4:memory:/\n1:cpu,cpuacct:" + docker + "\n0::/\n"));
  EXPECT_TRUE(cgroup_contains(cpu, "1:cpu,cpuacct:" + docker + "/child\n"));
  EXPECT_FALSE(cgroup_contains(cpu, "1:cpu,cpuacct:" + docker + "0\n"));  // a sibling, not below
  EXPECT_FALSE(cgroup_contains(cpu, "4:memory:" + docker + "\n0::" + docker + "\n"));
  const CgroupTarget v2 = target(true, "", "/kubepods.slice");
  EXPECT_TRUE(cgroup_contains(v2, "1:cpu:/\n0::/kubepods.slice/kubepods-pod1.slice/x.scope\n"));
  EXPECT_FALSE(cgroup_contains(v2, "1:cpu:/kubepods.slice\n0::/\n"));
  EXPECT_TRUE(cgroup_contains(target(true, "", "/"), "0::/anything\n"));
  EXPECT_FALSE(cgroup_contains(v2, ""));
}

TEST(CgroupTargets, WhatIsNoCgroupIsRefusedInOneLine) {
  const std::vector<CgroupMount> mounts = cgroup_mounts(kHybrid);
  auto no_subsys = [](const std::string&) { return std::optional<int32_t>(); };
  try {
    resolve_cgroup("/tmp", mounts, no_subsys);
    FAIL() << "/tmp resolved";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "--cgroup /tmp: /tmp is not a cgroup directory");
  }
  try {
    resolve_cgroup("no/such/group", mounts, no_subsys);
    FAIL() << "a missing path resolved";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(
        e.what(),
        "--cgroup no/such/group: no such cgroup (looked for /sys/fs/cgroup/no/such/group)");
  }
}

}  // namespace
}  // namespace bpfprof
