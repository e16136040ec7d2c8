// libFuzzer targets for the text parsers, one binary per target (FUZZ_TARGET selects):
// /proc/PID/maps, /proc/kallsyms, /tmp/perf-PID.map, the cgroup files read for the
// memory limit (/proc/self/cgroup, /proc/self/mounts, memory.stat), and a process's context
// (/proc/PID/cgroup, its NSpid line) with record --cgroup's mountinfo and membership tests. Each
// parse must return (never crash, hang or read out of bounds, which the sanitizers check), and
// lookups in what it returns must be consistent.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "symbols/jit/perf_map.h"
#include "symbols/kernel/kallsyms.h"
#include "symbols/util/proc_maps.h"
#if FUZZ_TARGET == 10
#include "userspace/capture/memory_limit.h"
#elif FUZZ_TARGET == 11
#include "userspace/model/process_context.h"
#include "userspace/session/cgroup_targets.h"
#endif

using namespace bpfprof;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
#if FUZZ_TARGET == 1
  for (const MapEntry& m : parse_proc_maps(text))
    if (m.end < m.start) abort();  // a parsed mapping is never inverted
#elif FUZZ_TARGET == 2
  const KernelSymbols symbols = KernelSymbols::parse(text);
  for (size_t i = 0; i < symbols.size(); ++i) {
    const KernelSymbol s = symbols[i];
    const std::optional<KernelSymbol> found = symbols.lookup(s.address);
    if (found && (found->address > s.address || found->name != s.name)) abort();
  }
#elif FUZZ_TARGET == 3
  const PerfMap map = PerfMap::parse(text);
  for (uint64_t address : {uint64_t{0}, uint64_t{0x1000}, uint64_t{0x7f0000000000}, ~uint64_t{0}}) {
    const PerfMapEntry* e = map.lookup(address);
    if (e && (address < e->start || address - e->start >= e->size)) abort();
  }
#elif FUZZ_TARGET == 10
  if (const auto membership = memory_cgroup_of(text))
    if (membership->path.empty() || membership->path[0] != '/') abort();
  for (const CgroupVersion version : {CgroupVersion::kV1, CgroupVersion::kV2})
    if (const auto mount = memory_hierarchy_mount(text, version))
      if (mount->size() > text.size()) abort();
  memory_stat_value(text, "active_file");
  memory_stat_value(text, "total_inactive_file");
#elif FUZZ_TARGET == 11
  // A process's context: bounded, and its label made of what was kept.
  const ProcessContext context = context_from_cgroups(text);
  if (context.cgroup.size() > kMaxCgroupPathBytes || context.container_id.size() > 64) abort();
  if (context_label(context).size() > 64 + 64 + 300) abort();
  namespace_pid_from_status(text);
  for (const CgroupMount& mount : cgroup_mounts(text))
    if (mount.mount_point.size() > text.size()) abort();
  CgroupTarget target;
  target.path = "/docker";
  target.controller = "cpu";
  cgroup_contains(target, text);
  target.v2 = true;
  cgroup_contains(target, text);
#else
#error \
    "FUZZ_TARGET must be 1 (proc maps), 2 (kallsyms), 3 (perf map), 10 (cgroup files) or 11 (process context)"
#endif
  return 0;
}
