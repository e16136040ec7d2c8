#include "userspace/capture/memory_limit.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <vector>

#include "symbols/util/read_file.h"
#include "symbols/util/text.h"
#include "userspace/model/process_context.h"

namespace bpfprof {

namespace {

std::optional<uint64_t> parse_number(std::string_view text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.remove_suffix(1);
  uint64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || text.empty()) return std::nullopt;
  return value;
}

// The names of a hierarchy's files, which differ between the two versions.
struct MemoryFiles {
  const char* limit;
  const char* usage;
  const char* active_file;
  const char* inactive_file;
};
constexpr MemoryFiles kV1Files{"memory.limit_in_bytes", "memory.usage_in_bytes",
                               "total_active_file", "total_inactive_file"};
constexpr MemoryFiles kV2Files{"memory.max", "memory.current", "active_file", "inactive_file"};

// v1 writes "no limit" as a page-counter maximum near 2^63, v2 as "max".
constexpr uint64_t kNoLimit = uint64_t{1} << 62;

// The room under one cgroup's own limit; nothing when it has none or cannot be read.
std::optional<uint64_t> room_in(const std::string& dir, const MemoryFiles& files) {
  const auto limit_text = read_entire_file(dir + "/" + files.limit);
  if (!limit_text) return std::nullopt;
  const auto limit = parse_number(*limit_text);  // "max" does not parse: no limit
  if (!limit || *limit >= kNoLimit) return std::nullopt;
  const auto usage_text = read_entire_file(dir + "/" + files.usage);
  const auto usage = usage_text ? parse_number(*usage_text) : std::nullopt;
  if (!usage) return std::nullopt;
  uint64_t reclaimable = 0;
  if (const auto stat = read_entire_file(dir + "/memory.stat"))
    reclaimable = memory_stat_value(*stat, files.active_file).value_or(0) +
                  memory_stat_value(*stat, files.inactive_file).value_or(0);
  const uint64_t held = usage > reclaimable ? *usage - reclaimable : 0;
  return *limit > held ? *limit - held : 0;
}

}  // namespace

std::optional<CgroupMembership> memory_cgroup_of(std::string_view proc_cgroup) {
  std::optional<CgroupMembership> unified;
  for (const CgroupLine& line : cgroup_lines(proc_cgroup)) {
    const std::string path(line.path);
    if (path.empty() || path[0] != '/') continue;
    if (line.v2()) {
      unified = CgroupMembership{CgroupVersion::kV2, path};
      continue;
    }
    if (line.has_controller("memory")) return CgroupMembership{CgroupVersion::kV1, path};
  }
  return unified;
}

std::optional<std::string> memory_hierarchy_mount(std::string_view proc_mounts,
                                                  CgroupVersion version) {
  for (std::string_view line : split(proc_mounts, '\n')) {
    const auto fields = split(line, ' ');  // source mount-point type options dump pass
    if (fields.size() < 4) continue;
    if (version == CgroupVersion::kV2 && fields[2] == "cgroup2") return std::string(fields[1]);
    if (version == CgroupVersion::kV1 && fields[2] == "cgroup") {
      const auto options = split(fields[3], ',');
      if (std::find(options.begin(), options.end(), "memory") != options.end())
        return std::string(fields[1]);
    }
  }
  return std::nullopt;
}

std::optional<uint64_t> memory_stat_value(std::string_view memory_stat, std::string_view key) {
  for (std::string_view line : split(memory_stat, '\n')) {
    const size_t space = line.find(' ');
    if (space == std::string_view::npos || line.substr(0, space) != key) continue;
    return parse_number(line.substr(space + 1));
  }
  return std::nullopt;
}

std::optional<uint64_t> memory_cgroup_room() {
  const auto cgroup_text = read_entire_file("/proc/self/cgroup");
  const auto mounts_text = read_entire_file("/proc/self/mounts");
  if (!cgroup_text || !mounts_text) return std::nullopt;
  const auto membership = memory_cgroup_of(*cgroup_text);
  if (!membership) return std::nullopt;
  const auto mount = memory_hierarchy_mount(*mounts_text, membership->version);
  if (!mount) return std::nullopt;
  const MemoryFiles& files = membership->version == CgroupVersion::kV1 ? kV1Files : kV2Files;
  // A limit of any ancestor applies too: walk up to the hierarchy's root.
  std::optional<uint64_t> room;
  std::string path = membership->path;
  while (true) {
    if (const auto here = room_in(*mount + (path == "/" ? "" : path), files))
      room = std::min(room.value_or(*here), *here);
    if (path == "/") break;
    const size_t slash = path.rfind('/');
    path = slash == 0 ? "/" : path.substr(0, slash);
  }
  return room;
}

std::optional<uint64_t> address_space_room() {
  rlimit limit{};
  if (getrlimit(RLIMIT_AS, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return std::nullopt;
  const auto statm = read_entire_file("/proc/self/statm");
  const auto pages = statm ? parse_number(split(*statm, ' ')[0]) : std::nullopt;
  if (!pages) return std::nullopt;
  const uint64_t size = *pages * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  return limit.rlim_cur > size ? limit.rlim_cur - size : 0;
}

}  // namespace bpfprof
