/* The walk's lookups in the tables userspace loaded: the process's mapping that holds a pc,
 * then the row of that mapping's table that covers it (bpf/unwind_maps.h,
 * bpf/unwind_table.h). */
#ifndef BPFPROF_UNWIND_LOOKUP_H
#define BPFPROF_UNWIND_LOOKUP_H

#include "vmlinux.h"

#include <bpf/bpf_helpers.h>

#include "bpf/maps.h"
#include "bpf/unwind_maps.h"
#include "bpf/unwind_table.h"

/* Binary searches without branches on the compared values: with a branch per step the
 * verifier explores both halves at every step with different bounds (loading takes seconds);
 * moving lo or hi by arithmetic leaves one path. `right` is 1 when the probe lies at or below
 * the key; the barrier keeps the compiler from turning the arithmetic back into a branch. */
static __always_inline void search_step(__u64* lo, __u64* hi, __u64 mid, __u64 probe, __u64 key) {
  __u64 right = ((key - probe) >> 63) ^ 1; /* probe and key are below 2^63 */
  asm volatile("" : "+r"(right));
  *lo += right * (mid + 1 - *lo);
  *hi -= (1 - right) * (*hi - mid);
}

/* The mapping holding pc: the last one starting at or below it, if it reaches pc. */
static __always_inline const struct bpfprof_exec_mapping* find_mapping(
    const struct bpfprof_process_mappings* pm, __u64 pc) {
  if (!pm) return NULL;
  __u64 lo = 0, hi = pm->count;
  if (hi > BPFPROF_MAX_PROCESS_MAPPINGS) hi = BPFPROF_MAX_PROCESS_MAPPINGS;
  if (pc >> 63) return NULL;
  for (int i = 0; i < BPFPROF_MAPPING_SEARCH_STEPS && lo < hi; i++) {
    __u64 mid = (lo + hi) / 2;
    if (mid >= BPFPROF_MAX_PROCESS_MAPPINGS) return NULL;
    search_step(&lo, &hi, mid, pm->mappings[mid].start, pc);
  }
  if (lo == 0 || lo > BPFPROF_MAX_PROCESS_MAPPINGS) return NULL;
  const struct bpfprof_exec_mapping* m = &pm->mappings[lo - 1];
  return pc < m->end ? m : NULL;
}

/* Row `index` of the row array, through its chunk; NULL past the chunks added. */
static __always_inline const struct bpfprof_unwind_entry* unwind_row_at(__u32 index) {
  const __u32 block = index / BPFPROF_UNWIND_BLOCK_ROWS;
  const __u32 chunk = block / BPFPROF_UNWIND_CHUNK_BLOCKS;
  void* rows_chunk = bpf_map_lookup_elem(&unwind_rows, &chunk);
  if (!rows_chunk) return NULL;
  const __u32 in_chunk = block % BPFPROF_UNWIND_CHUNK_BLOCKS;
  const struct bpfprof_unwind_row_block* rows = bpf_map_lookup_elem(rows_chunk, &in_chunk);
  if (!rows) return NULL;
  return &rows->rows[index % BPFPROF_UNWIND_BLOCK_ROWS];
}

/* The index of the rule of the row covering elf_pc in the mapping's table (the last row
 * starting at or below it in its page, bpf/unwind_table.h), or -1. A global function: the
 * verifier checks its search once, not at each of its callers' states. */
__noinline long find_rule_index(const struct bpfprof_exec_mapping* m, __u64 elf_pc) {
  if (!m) return -1;
  const __u64 page_number = elf_pc >> BPFPROF_UNWIND_PAGE_BITS;
  if (elf_pc > 0xffffffffull || page_number < m->page_base ||
      page_number - m->page_base >= m->page_count)
    return -1;
  __u32 page_index = m->first_page + (__u32)(page_number - m->page_base);
  const struct bpfprof_unwind_page* page = bpf_map_lookup_elem(&unwind_pages, &page_index);
  if (!page) return -1;
  const __u64 low = elf_pc & BPFPROF_UNWIND_PAGE_MASK;
  const __u64 first = page->first_row;
  __u64 lo = first, hi = first + page->row_count;
  for (int i = 0; i < BPFPROF_ROW_SEARCH_STEPS && lo < hi; i++) {
    __u32 mid = lo + (hi - lo) / 2;
    const struct bpfprof_unwind_entry* row = unwind_row_at(mid);
    if (!row) return -1;
    search_step(&lo, &hi, mid, row->pc_low, low);
  }
  if (lo < hi || lo == first) return -1;
  const struct bpfprof_unwind_entry* row = unwind_row_at(lo - 1);
  if (!row) return -1;
  return row->rule;
}

/* The rule of the row covering elf_pc in the mapping's table, or NULL. */
static __always_inline const struct bpfprof_unwind_rule* find_row(
    const struct bpfprof_exec_mapping* m, __u64 elf_pc) {
  const long index = find_rule_index(m, elf_pc);
  if (index < 0) return NULL;
  __u32 rule = (__u32)index;
  return bpf_map_lookup_elem(&unwind_rules, &rule);
}

#endif
