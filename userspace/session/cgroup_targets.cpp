#include "userspace/session/cgroup_targets.h"

#include <bpf/btf.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>

#include <climits>
#include <cstdlib>
#include <memory>
#include <stdexcept>

#include "symbols/util/read_file.h"
#include "symbols/util/text.h"
#include "userspace/model/process_context.h"
#include "userspace/session/proc_snapshot.h"

namespace bpfprof {
namespace {

// The kernel's enum cgroup_subsys_id value of a v1 controller ("cpu" -> cpu_cgrp_id), from its
// BTF; nullopt for a name it does not know.
std::optional<int32_t> kernel_subsys_id(const std::string& controller) {
  const std::unique_ptr<struct btf, decltype(&btf__free)> vmlinux(btf__load_vmlinux_btf(),
                                                                  &btf__free);
  if (!vmlinux) return std::nullopt;
  const int type_id = btf__find_by_name_kind(vmlinux.get(), "cgroup_subsys_id", BTF_KIND_ENUM);
  if (type_id <= 0) return std::nullopt;
  const struct btf_type* type = btf__type_by_id(vmlinux.get(), type_id);
  const struct btf_enum* values = btf_enum(type);
  std::optional<int32_t> id, count;
  for (int i = 0; i < btf_vlen(type); ++i) {
    const char* text = btf__name_by_offset(vmlinux.get(), values[i].name_off);
    const std::string_view name = text ? text : "";
    if (name == controller + "_cgrp_id") id = values[i].val;
    if (name == "CGROUP_SUBSYS_COUNT") count = values[i].val;
  }
  if (!id || !count || *id < 0 || *id >= *count) return std::nullopt;
  return id;
}

size_t cgroup_depth(std::string_view path) {
  size_t n = 0;
  for (std::string_view part : split(path, '/')) n += !part.empty();
  return n;
}

}  // namespace

std::vector<CgroupMount> cgroup_mounts(std::string_view mountinfo) {
  std::vector<CgroupMount> mounts;
  for (std::string_view line : split(mountinfo, '\n')) {
    // "ID PARENT MAJ:MIN ROOT MOUNT_POINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER_OPTIONS"
    const size_t dash = line.find(" - ");
    if (dash == std::string_view::npos) continue;
    const std::vector<std::string_view> head = split(line.substr(0, dash), ' ');
    const std::vector<std::string_view> tail = split(line.substr(dash + 3), ' ');
    if (head.size() < 5 || tail.size() < 3) continue;
    CgroupMount mount;
    mount.mount_point = head[4];
    if (tail[0] == "cgroup2") {
      mount.v2 = true;
    } else if (tail[0] == "cgroup") {
      for (std::string_view option : split(tail[2], ','))
        if (option != "rw" && option != "ro" && !option.starts_with("name=") &&
            option.find('=') == std::string_view::npos && option != "clone_children" &&
            option != "noprefix" && option != "xattr" && option != "cpuset_v2_mode")
          mount.controllers.emplace_back(option);
    } else {
      continue;
    }
    mounts.push_back(std::move(mount));
  }
  return mounts;
}

CgroupTarget resolve_cgroup(
    const std::string& given, const std::vector<CgroupMount>& mounts,
    const std::function<std::optional<int32_t>(const std::string&)>& subsys_id) {
  const std::string full = given.starts_with('/') ? given : "/sys/fs/cgroup/" + given;
  auto refuse = [&](const std::string& why) {
    return std::runtime_error("--cgroup " + given + ": " + why);
  };
  char resolved[PATH_MAX];
  if (!realpath(full.c_str(), resolved)) throw refuse("no such cgroup (looked for " + full + ")");
  struct stat st {};
  struct statfs fs {};
  if (stat(resolved, &st) != 0 || !S_ISDIR(st.st_mode) || statfs(resolved, &fs) != 0 ||
      (fs.f_type != CGROUP_SUPER_MAGIC && fs.f_type != CGROUP2_SUPER_MAGIC))
    throw refuse(std::string(resolved) + " is not a cgroup directory");
  const CgroupMount* mount = nullptr;
  const std::string_view path(resolved);
  for (const CgroupMount& m : mounts)
    if (path.starts_with(m.mount_point) &&
        (path.size() == m.mount_point.size() || path[m.mount_point.size()] == '/' ||
         m.mount_point == "/") &&
        (!mount || m.mount_point.size() > mount->mount_point.size()))
      mount = &m;
  if (!mount) throw refuse(std::string(resolved) + " is under no cgroup mount");
  CgroupTarget target;
  target.directory = resolved;
  target.path = std::string(path.substr(mount->mount_point.size()));
  if (target.path.empty()) target.path = "/";
  target.v2 = mount->v2;
  target.filter.id = st.st_ino;
  target.filter.level = static_cast<uint32_t>(cgroup_depth(target.path));
  target.filter.subsys = BPFPROF_CGROUP_V2;
  if (!target.v2) {
    for (const std::string& controller : mount->controllers)
      if (std::optional<int32_t> id = subsys_id(controller)) {
        target.controller = controller;
        target.filter.subsys = *id;
        break;
      }
    if (target.controller.empty())
      throw refuse("a v1 hierarchy without a controller (" + mount->mount_point +
                   "); give the path in a controller's hierarchy (cpu, memory) or in the v2 one");
  }
  return target;
}

CgroupTarget resolve_cgroup(const std::string& path) {
  const std::optional<std::string> mountinfo = read_entire_file("/proc/self/mountinfo");
  if (!mountinfo) throw std::runtime_error("--cgroup: cannot read /proc/self/mountinfo");
  return resolve_cgroup(path, cgroup_mounts(*mountinfo), kernel_subsys_id);
}

bool cgroup_contains(const CgroupTarget& target, std::string_view proc_cgroup) {
  for (const CgroupLine& line : cgroup_lines(proc_cgroup)) {
    if (target.v2 ? !line.v2() : !line.has_controller(target.controller)) continue;
    const std::string_view path = line.path;
    return target.path == "/" || path == target.path ||
           (path.starts_with(target.path) && path[target.path.size()] == '/');
  }
  return false;
}

std::vector<Pid> processes_in(const std::vector<CgroupTarget>& targets) {
  std::vector<Pid> inside;
  for (Pid pid : list_processes()) {
    const std::optional<std::string> text =
        read_entire_file("/proc/" + std::to_string(pid.value) + "/cgroup");
    if (!text) continue;
    for (const CgroupTarget& target : targets)
      if (cgroup_contains(target, *text)) {
        inside.push_back(pid);
        break;
      }
  }
  return inside;
}

}  // namespace bpfprof
