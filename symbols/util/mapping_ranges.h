// A process's mappings over time, one type for the session model and the unwinder: a new
// mapping replaces whatever it overlaps, as mmap(MAP_FIXED) does, trimming or splitting the
// mappings it only partly covers (their file offsets follow).
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

// The mappings of one address space, each of type `M` (as for insert_replacing_overlaps).
template <typename M>
class AddressSpaceOf {
 public:
  void add(const M& mapping) {
    version_ = next_version();
    insert_replacing_overlaps(by_start_, mapping);
  }
  const M* find(uint64_t address) const {
    auto it = by_start_.upper_bound(address);
    if (it == by_start_.begin()) return nullptr;
    --it;
    return address < it->second.end ? &it->second : nullptr;
  }
  size_t size() const { return by_start_.size(); }
  bool empty() const { return by_start_.empty(); }
  // In address order: pairs of (start, mapping).
  auto begin() const { return by_start_.begin(); }
  auto end() const { return by_start_.end(); }
  // Changes with every change of the mappings, unique across all address spaces of this
  // type: what was computed against one version stays valid until the next.
  uint64_t version() const { return version_; }

 private:
  static uint64_t next_version() {
    static uint64_t counter = 0;
    return ++counter;
  }
  std::map<uint64_t, M> by_start_;
  uint64_t version_ = next_version();
};

}  // namespace bpfprof
