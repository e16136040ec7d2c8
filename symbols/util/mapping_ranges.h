// The one algorithm for a process's mappings over time, shared by the session model and the
// unwinder: a new mapping replaces whatever it overlaps, as mmap(MAP_FIXED) does, trimming
// or splitting the mappings it only partly covers (their file offsets follow).
#pragma once

#include <cstdint>
#include <map>

namespace bpfprof {

// `M` has uint64_t start, end (one past the last byte) and file_offset; `by_start` is keyed
// by start and holds no overlapping mappings.
template <typename M>
void insert_replacing_overlaps(std::map<uint64_t, M>& by_start, const M& mapping) {
  if (mapping.end <= mapping.start) return;
  auto it = by_start.lower_bound(mapping.start);
  if (it != by_start.begin()) --it;  // the one before may reach into the new one
  while (it != by_start.end() && it->second.start < mapping.end) {
    const M old = it->second;
    if (old.end <= mapping.start) {
      ++it;
      continue;
    }
    it = by_start.erase(it);
    if (old.start < mapping.start) {
      M head = old;
      head.end = mapping.start;
      by_start.emplace(head.start, head);
    }
    if (old.end > mapping.end) {
      M tail = old;
      tail.file_offset += mapping.end - old.start;
      tail.start = mapping.end;
      by_start.emplace(tail.start, tail);
      break;
    }
  }
  by_start.emplace(mapping.start, mapping);
}

}  // namespace bpfprof
