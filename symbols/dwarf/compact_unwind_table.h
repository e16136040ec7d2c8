// An unwind table (unwind_table.h) in the form the kernel keeps it (bpf/unwind_table.h): the
// file's distinct rules once each, rows of (pc's low 16 bits, rule index), and per 64 KiB
// page of code where its rows are. A whole machine's tables repeat a few thousand rules
// (even a file of a million rows has only about a thousand), so a row takes 4 bytes instead of 16,
// and a lookup searches one page's rows (at most a few thousand) instead of the file's.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "bpf/unwind_table.h"
#include "symbols/dwarf/unwind_table.h"

namespace bpfprof {

using UnwindRule = bpfprof_unwind_rule;

struct CompactUnwindTable {
  uint32_t page_base = 0;                  // the first page's number: its ELF address >> 16
  std::vector<bpfprof_unwind_page> pages;  // first_row: an index into `rows`
  std::vector<bpfprof_unwind_entry> rows;  // rule: an index into `rules`
  std::vector<UnwindRule> rules;           // distinct, in the order of their first row
};

// A row's rule: the row less its pc.
UnwindRule rule_of(const UnwindRow& row);
bool operator==(const UnwindRule& a, const UnwindRule& b);

// The compact form of rows sorted by pc (UnwindTable::rows); nullopt for a table of more
// distinct rules than a 16-bit index names (or rows not sorted). Rows under a page with no row of
// its own repeat the rule in force before it, unless that is BPFPROF_CFA_UNKNOWN (no row: the same
// for the walk).
std::optional<CompactUnwindTable> compact_unwind_table(std::span<const UnwindRow> rows);

// The rule that holds at `pc` (a file virtual address), found as the BPF walk finds it
// (bpf/unwind_lookup.h, find_row); nullptr where no row does.
const UnwindRule* find_compact_rule(const CompactUnwindTable& table, uint64_t pc);

}  // namespace bpfprof
