#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

// How much memory this process may still take under its cgroups' limits. BPF maps are
// charged to the loading process's memory cgroup: when they fill it, the next page the
// recorder touches wakes the cgroup's OOM killer, which kills the recorder before it can say
// why. Checking the room first turns that into an error message.
namespace bpfprof {

enum class CgroupVersion { kV1, kV2 };

// The memory cgroup of a process, from /proc/PID/cgroup's text: v1's line naming the
// `memory` controller, else v2's `0::` line.
struct CgroupMembership {
  CgroupVersion version = CgroupVersion::kV2;
  std::string path;  // relative to the hierarchy's mount point, starts with '/'
};
std::optional<CgroupMembership> memory_cgroup_of(std::string_view proc_cgroup);

// Where the memory hierarchy is mounted, from /proc/self/mounts' text.
std::optional<std::string> memory_hierarchy_mount(std::string_view proc_mounts,
                                                  CgroupVersion version);

// The value of `key` in a memory.stat text (`key value` lines).
std::optional<uint64_t> memory_stat_value(std::string_view memory_stat, std::string_view key);

// The bytes this process can still be charged before a limit of its cgroup or of an ancestor
// is reached, counting file cache as reclaimable. Nothing when no limit applies or the
// cgroup files cannot be read.
std::optional<uint64_t> memory_cgroup_room();

// The address space this process may still map under its RLIMIT_AS (`ulimit -v`), from its
// size in /proc/self/statm. Nothing when no limit is set. A map too big for it fails to load
// at some allocation or other (libbpf's parse of the kernel's BTF says "No such process"),
// and one that fits too tightly fails later, when the profile is written.
std::optional<uint64_t> address_space_room();

}  // namespace bpfprof
