#include "symbols/jit/perf_map.h"

#include <algorithm>
#include <charconv>
#include <iterator>
#include <map>

#include "symbols/util/text.h"
#include "symbols/util/untrusted_file.h"

namespace bpfprof {
namespace {

// A hex number, with or without 0x, at the front of `s` and followed by whitespace (or the
// end); consumes it.
std::optional<uint64_t> take_hex(std::string_view& s) {
  if (s.size() >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) s.remove_prefix(2);
  uint64_t value = 0;
  const char* end = s.data() + s.size();
  auto [next, error] = std::from_chars(s.data(), end, value, 16);
  if (error != std::errc{} || next == s.data()) return std::nullopt;
  if (next != end && !is_space(*next)) return std::nullopt;
  s.remove_prefix(static_cast<size_t>(next - s.data()));
  return value;
}

std::optional<PerfMapEntry> parse_perf_map_line(std::string_view line) {
  line = trim(line);
  std::optional<uint64_t> start = take_hex(line);
  if (!start) return std::nullopt;
  line = trim(line);
  std::optional<uint64_t> size = take_hex(line);
  if (!size || *size == 0 || *start > UINT64_MAX - *size) return std::nullopt;
  line = trim(line);
  if (line.empty()) return std::nullopt;
  return PerfMapEntry{*start, *size, std::string(line)};
}

struct Owned {
  uint64_t end;
  uint32_t entry;
};

// Makes [start, end) belong to `entry`, taking it away from whatever owned parts of it.
void assign_range(std::map<uint64_t, Owned>& ranges, uint64_t start, uint64_t end, uint32_t entry) {
  auto it = ranges.lower_bound(start);
  // A range that starts before `start` and reaches into it: keep its head, and its tail
  // when it runs past `end`.
  if (it != ranges.begin()) {
    auto prev = std::prev(it);
    if (prev->second.end > start) {
      const Owned old = prev->second;
      prev->second.end = start;
      if (old.end > end) ranges.emplace(end, old);
    }
  }
  // Ranges that start inside [start, end): drop them, keeping the tail of the last one.
  while (it != ranges.end() && it->first < end) {
    const Owned old = it->second;
    it = ranges.erase(it);
    if (old.end > end) {
      ranges.emplace(end, old);
      break;
    }
  }
  ranges.emplace(start, Owned{end, entry});
}

}  // namespace

PerfMap PerfMap::parse(std::string_view text) {
  std::vector<PerfMapEntry> all;
  std::map<uint64_t, Owned> ranges;
  while (!text.empty()) {
    const size_t newline = text.find('\n');
    const std::string_view line = text.substr(0, newline);
    text.remove_prefix(newline == std::string_view::npos ? text.size() : newline + 1);
    std::optional<PerfMapEntry> entry = parse_perf_map_line(line);
    if (!entry || all.size() >= UINT32_MAX) continue;
    const auto index = static_cast<uint32_t>(all.size());
    assign_range(ranges, entry->start, entry->start + entry->size, index);
    all.push_back(std::move(*entry));
  }

  // Keep only the entries that still own some range, in file order.
  std::vector<uint32_t> new_index(all.size(), UINT32_MAX);
  for (const auto& [start, owned] : ranges) new_index[owned.entry] = 0;
  PerfMap map;
  for (size_t i = 0; i < all.size(); i++) {
    if (new_index[i] == UINT32_MAX) continue;
    new_index[i] = static_cast<uint32_t>(map.entries_.size());
    map.entries_.push_back(std::move(all[i]));
  }
  map.segments_.reserve(ranges.size());
  for (const auto& [start, owned] : ranges)
    map.segments_.push_back(Segment{start, owned.end, new_index[owned.entry]});
  return map;
}

std::optional<PerfMap> PerfMap::load(const std::string& path, uint32_t owner_uid) {
  std::optional<std::string> text =
      read_untrusted(path, UntrustedKind::kPerfMap, OwnerRule{owner_uid});
  if (!text) return std::nullopt;
  return parse(*text);
}

const PerfMapEntry* PerfMap::lookup(uint64_t address) const {
  auto it = std::upper_bound(segments_.begin(), segments_.end(), address,
                             [](uint64_t a, const Segment& s) { return a < s.start; });
  if (it == segments_.begin()) return nullptr;
  --it;
  return address < it->end ? &entries_[it->entry] : nullptr;
}

}  // namespace bpfprof
