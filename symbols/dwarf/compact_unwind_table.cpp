#include "symbols/dwarf/compact_unwind_table.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <iterator>
#include <limits>

namespace bpfprof {

static_assert(sizeof(UnwindRule) == 12, "a row less its pc");
static_assert(sizeof(UnwindRow) == 4 + sizeof(UnwindRule), "the rule follows the pc");
static_assert(sizeof(bpfprof_unwind_entry) == 4 && sizeof(bpfprof_unwind_page) == 8);

UnwindRule rule_of(const UnwindRow& row) {
  return UnwindRule{row.cfa_offset, row.rbp_offset, row.cfa_rule,       row.rbp_rule,
                    row.rbx_offset, row.rbx_rule,   row.go_m_curg_words};
}

bool operator==(const UnwindRule& a, const UnwindRule& b) { return memcmp(&a, &b, sizeof(a)) == 0; }

namespace {

constexpr uint32_t kPageBits = BPFPROF_UNWIND_PAGE_BITS;

// A rule's 12 bytes as two words, compared and hashed without a copy to the heap (a table of
// libLLVM's size looks up a million rules).
struct RuleKey {
  uint64_t low;
  uint32_t high;
  bool operator==(const RuleKey&) const = default;
};

RuleKey key_of(const UnwindRule& rule) {
  RuleKey key{};
  memcpy(&key.low, &rule, sizeof(key.low));
  memcpy(&key.high, reinterpret_cast<const char*>(&rule) + sizeof(key.low), sizeof(key.high));
  return key;
}

// The rules of one table, each given the next index when first met: an open-addressing table of
// indices into `rules` (a node-based map's lookups were a tenth of a large table's build).
class RuleIndex {
 public:
  std::optional<uint16_t> index(const UnwindRule& rule, std::vector<UnwindRule>& rules) {
    const RuleKey key = key_of(rule);
    for (size_t slot = hash(key) & mask();; slot = (slot + 1) & mask()) {
      if (slots_[slot] == kEmpty) {
        if (rules.size() > std::numeric_limits<uint16_t>::max()) return std::nullopt;
        slots_[slot] = static_cast<uint32_t>(rules.size());
        rules.push_back(rule);
        if (rules.size() * 2 > slots_.size()) grow(rules);
        return static_cast<uint16_t>(rules.size() - 1);
      }
      if (key_of(rules[slots_[slot]]) == key) return static_cast<uint16_t>(slots_[slot]);
    }
  }

 private:
  static constexpr uint32_t kEmpty = std::numeric_limits<uint32_t>::max();
  static size_t hash(const RuleKey& key) {
    return static_cast<size_t>(
        (key.low * 0x9E3779B97F4A7C15ull ^ key.high) * 0xC2B2AE3D27D4EB4Full >> 17);
  }
  size_t mask() const { return slots_.size() - 1; }
  void grow(const std::vector<UnwindRule>& rules) {
    slots_.assign(slots_.size() * 2, kEmpty);
    for (uint32_t i = 0; i < rules.size(); ++i) {
      size_t slot = hash(key_of(rules[i])) & mask();
      while (slots_[slot] != kEmpty) slot = (slot + 1) & mask();
      slots_[slot] = i;
    }
  }

  std::vector<uint32_t> slots_ = std::vector<uint32_t>(256, kEmpty);
};

}  // namespace

std::optional<CompactUnwindTable> compact_unwind_table(std::span<const UnwindRow> rows) {
  CompactUnwindTable table;
  if (rows.empty()) return table;
  if (rows.back().pc < rows.front().pc) return std::nullopt;  // not sorted (the builder sorts)
  RuleIndex index;
  table.page_base = rows.front().pc >> kPageBits;
  const uint32_t last_page = rows.back().pc >> kPageBits;
  table.pages.resize(last_page - table.page_base + 1);
  table.rows.reserve(rows.size() + table.pages.size());
  size_t next = 0;  // the first row not placed yet
  for (uint32_t page = table.page_base; page <= last_page; ++page) {
    bpfprof_unwind_page& out = table.pages[page - table.page_base];
    out.first_row = static_cast<uint32_t>(table.rows.size());
    const uint64_t page_start = uint64_t{page} << kPageBits;
    // The row in force at the page's start, if it starts before the page.
    if (next > 0 && (next == rows.size() || rows[next].pc != page_start) &&
        rows[next - 1].cfa_rule != BPFPROF_CFA_UNKNOWN) {
      const std::optional<uint16_t> rule = index.index(rule_of(rows[next - 1]), table.rules);
      if (!rule) return std::nullopt;
      table.rows.push_back({0, *rule});
    }
    for (; next < rows.size() && (rows[next].pc >> kPageBits) == page; ++next) {
      const std::optional<uint16_t> rule = index.index(rule_of(rows[next]), table.rules);
      if (!rule) return std::nullopt;
      table.rows.push_back(
          {static_cast<uint16_t>(rows[next].pc & BPFPROF_UNWIND_PAGE_MASK), *rule});
    }
    out.row_count = static_cast<uint32_t>(table.rows.size()) - out.first_row;
  }
  return table;
}

const UnwindRule* find_compact_rule(const CompactUnwindTable& table, uint64_t pc) {
  const uint64_t page = pc >> kPageBits;
  if (pc > std::numeric_limits<uint32_t>::max() || page < table.page_base ||
      page - table.page_base >= table.pages.size())
    return nullptr;
  const bpfprof_unwind_page& p = table.pages[page - table.page_base];
  const auto begin = table.rows.begin() + p.first_row;
  const auto end = begin + p.row_count;
  const uint16_t low = static_cast<uint16_t>(pc & BPFPROF_UNWIND_PAGE_MASK);
  auto after = std::upper_bound(begin, end, low, [](uint16_t value, const bpfprof_unwind_entry& e) {
    return value < e.pc_low;
  });
  if (after == begin) return nullptr;
  return &table.rules[std::prev(after)->rule];
}

}  // namespace bpfprof
