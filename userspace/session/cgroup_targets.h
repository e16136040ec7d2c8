// record --cgroup PATH: a subtree of a cgroup hierarchy (v2, or a v1 controller's), its
// processes running now, and the kernel's test for those that start in it later.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "bpf/events.h"
#include "userspace/model/ids.h"

namespace bpfprof {

struct CgroupTarget {
  std::string directory;   // its directory, resolved
  std::string path;        // inside its hierarchy: "/docker/<id>", "/" for the root
  bool v2 = false;         // else a v1 hierarchy, of `controller`
  std::string controller;  // v1: the controller its /proc/PID/cgroup line names ("cpu")
  bpfprof_cgroup_filter filter{};
};

// The cgroup mounts of a mountinfo text: their mount point, whether v2, and v1's controllers.
struct CgroupMount {
  std::string mount_point;
  bool v2 = false;
  std::vector<std::string> controllers;  // v1, as its super options name them
};
std::vector<CgroupMount> cgroup_mounts(std::string_view mountinfo);

// PATH as perf's -G takes it (under /sys/fs/cgroup, e.g. "cpu/docker/ID" or
// "unified/kubepods.slice"), or absolute. Throws std::runtime_error with a one-line message
// when it is not a cgroup directory, or is in a v1 hierarchy without a controller (named).
CgroupTarget resolve_cgroup(const std::string& path);
// The same with the mounts and the kernel's controller ids given (tests).
CgroupTarget resolve_cgroup(
    const std::string& path, const std::vector<CgroupMount>& mounts,
    const std::function<std::optional<int32_t>(const std::string&)>& subsys_id);

// Whether a /proc/PID/cgroup text puts the process inside `target`'s subtree.
bool cgroup_contains(const CgroupTarget& target, std::string_view proc_cgroup);

// The processes running now inside any of `targets`.
std::vector<Pid> processes_in(const std::vector<CgroupTarget>& targets);

}  // namespace bpfprof
