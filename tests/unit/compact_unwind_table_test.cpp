// The kernel's compact form of an unwind table (symbols/dwarf/compact_unwind_table.h): every
// pc finds the rule its row gives, across pages, in pages without a row of their own, and on
// a real file's table.
#include "symbols/dwarf/compact_unwind_table.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <variant>

namespace bpfprof {
namespace {

UnwindRow row(uint32_t pc, uint8_t rule, int32_t cfa_offset) {
  const bool unknown = rule == BPFPROF_CFA_UNKNOWN;
  UnwindRow r{};
  r.pc = pc;
  r.cfa_offset = cfa_offset;
  r.rbp_offset = static_cast<int16_t>(unknown ? 0 : -16);
  r.cfa_rule = rule;
  r.rbp_rule = unknown ? BPFPROF_RBP_UNKNOWN : BPFPROF_RBP_AT_CFA;
  return r;
}

// What the walk gets at pc from the compact table matches the row table's: the same rule, or
// none where the row's rule is UNKNOWN (the walk falls back either way).
void expect_same_rule(const std::vector<UnwindRow>& rows, const CompactUnwindTable& table,
                      uint64_t pc) {
  const UnwindRow* expected = find_unwind_row(rows, pc);
  const UnwindRule* found = find_compact_rule(table, pc);
  if (!expected || expected->cfa_rule == BPFPROF_CFA_UNKNOWN) {
    EXPECT_TRUE(!found || found->cfa_rule == BPFPROF_CFA_UNKNOWN) << std::hex << pc;
    return;
  }
  ASSERT_NE(found, nullptr) << std::hex << pc;
  EXPECT_TRUE(*found == rule_of(*expected)) << std::hex << pc;
}

TEST(CompactUnwindTable, RowsAcrossPagesFindTheirRules) {
  const std::vector<UnwindRow> rows = {
      row(0x1ff00, BPFPROF_CFA_RSP, 8),     row(0x1fff0, BPFPROF_CFA_RSP, 16),
      row(0x30010, BPFPROF_CFA_UNKNOWN, 0), row(0x30020, BPFPROF_CFA_RBP, 16),
      row(0x40000, BPFPROF_CFA_RSP, 8),     row(0x40008, BPFPROF_CFA_RSP, 16),
      row(0x5fff0, BPFPROF_CFA_UNKNOWN, 0), row(0x70000, BPFPROF_CFA_RSP, 8),
      row(0x70001, BPFPROF_CFA_UNKNOWN, 0)};
  const std::optional<CompactUnwindTable> table = compact_unwind_table(rows);
  ASSERT_TRUE(table);
  EXPECT_EQ(table->page_base, 1u);
  EXPECT_EQ(table->pages.size(), 7u);  // 0x1.... to 0x7....
  EXPECT_EQ(table->rules.size(), 4u);  // RSP 8, RSP 16, UNKNOWN, RBP 16
  // Page 2 starts under RSP 16 (from 0x1fff0), page 3 too; page 4 has a row at its start;
  // page 6 (under UNKNOWN, from 0x5fff0) has none.
  EXPECT_EQ(table->pages[2 - 1].row_count, 1u);
  EXPECT_EQ(table->pages[4 - 1].row_count, 2u);
  EXPECT_EQ(table->pages[6 - 1].row_count, 0u);
  EXPECT_EQ(find_compact_rule(*table, 0x1feff), nullptr);
  EXPECT_EQ(find_compact_rule(*table, 0x80000), nullptr);
  for (uint64_t pc = 0x1ff00; pc <= 0x70001; pc += (pc & 0xfff) == 0xff0 ? 1 : 0x10)
    expect_same_rule(rows, *table, pc);
  for (uint64_t pc : {0x1ffffu, 0x20000u, 0x2ffffu, 0x30000u, 0x3001fu, 0x40007u, 0x6ffffu})
    expect_same_rule(rows, *table, pc);
}

TEST(CompactUnwindTable, TooManyDistinctRulesHaveNoCompactForm) {
  std::vector<UnwindRow> rows;
  for (uint32_t i = 0; i <= 65536; ++i) rows.push_back(row(0x1000 + i, BPFPROF_CFA_RSP, 8 + i));
  EXPECT_FALSE(compact_unwind_table(rows));
  rows.pop_back();
  EXPECT_TRUE(compact_unwind_table(rows));
}

TEST(CompactUnwindTable, LibcFindsEveryRowsRule) {
  const UnwindTableResult built = build_unwind_table("/lib/x86_64-linux-gnu/libc.so.6");
  ASSERT_TRUE(std::holds_alternative<UnwindTable>(built));
  const std::vector<UnwindRow>& rows = std::get<UnwindTable>(built).rows;
  ASSERT_GT(rows.size(), 10'000u);
  const std::optional<CompactUnwindTable> table = compact_unwind_table(rows);
  ASSERT_TRUE(table);
  // A few hundred distinct rules; a row more per page at most.
  EXPECT_LT(table->rules.size(), 2'000u);
  EXPECT_LE(table->rows.size(), rows.size() + table->pages.size());
  for (const UnwindRow& r : rows) {
    expect_same_rule(rows, *table, r.pc);
    if (r.pc > rows.front().pc) expect_same_rule(rows, *table, r.pc - 1);
    expect_same_rule(rows, *table, r.pc + 1);
  }
  for (uint64_t page = table->page_base + 1; page < table->page_base + table->pages.size(); ++page)
    expect_same_rule(rows, *table, page << BPFPROF_UNWIND_PAGE_BITS);
}

}  // namespace
}  // namespace bpfprof
