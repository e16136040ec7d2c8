// JIT symbol maps in the perf format: /tmp/perf-<pid>.map, written by JITs (V8/node
// --perf-basic-prof, the JVM with perf-map-agent, CPython 3.12 -X perf, LuaJIT, ...) to name
// code they generate into anonymous memory. One line per function:
//
//   START SIZE name          START and SIZE in hex, with or without 0x; name may hold spaces
//
// A JIT that recompiles or moves code appends new lines for ranges it used before: a later
// line wins over earlier ones wherever their ranges overlap.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace bpfprof {

struct PerfMapEntry {
  uint64_t start = 0;
  uint64_t size = 0;
  std::string name;
};

class PerfMap {
 public:
  // Malformed lines (no size, non-hex numbers, an empty name, size 0, a range past 2^64)
  // are skipped.
  static PerfMap parse(std::string_view text);
  // nullopt if the file cannot be read or is refused (untrusted_file.h: it must be a regular
  // file, not a link planted in /tmp, owned by `owner_uid` or root, not writable by others).
  static std::optional<PerfMap> load(const std::string& path, uint32_t owner_uid);

  // The entry that names `address`: the last line of the file whose [start, start + size)
  // holds it; nullptr if none does.
  const PerfMapEntry* lookup(uint64_t address) const;

  // Entries that still name some address (lines wholly covered by later ones are dropped).
  size_t size() const { return entries_.size(); }
  bool empty() const { return entries_.empty(); }

 private:
  // Disjoint address ranges, sorted, each owned by one entry.
  struct Segment {
    uint64_t start;
    uint64_t end;  // exclusive
    uint32_t entry;
  };
  std::vector<PerfMapEntry> entries_;
  std::vector<Segment> segments_;
};

}  // namespace bpfprof
