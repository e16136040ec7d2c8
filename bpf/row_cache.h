/* The walker's row cache (row_cache, bpf/maps.h): the rows found for pcs, per CPU and program,
 * valid for the process-mappings generation that filled them; and the fast path that steps
 * through frames whose rows it holds, with their registers in registers. */
#ifndef BPFPROF_ROW_CACHE_H
#define BPFPROF_ROW_CACHE_H

#include "vmlinux.h"

#include <bpf/bpf_helpers.h>

#include "bpf/cfi_rules.h"
#include "bpf/events.h"
#include "bpf/maps.h"
#include "bpf/stack_window.h"
#include "bpf/unwind_maps.h"
#include "bpf/unwind_table.h"
#include "bpf/unwind_walk.h"

static __always_inline __u64 row_cache_key(const struct unwind_walk* w) {
  return w->pc | ((__u64)(w->exact & 1) << 63);
}

_Static_assert(BPFPROF_ROW_CACHE_CPU_ENTRIES == 2 << ROW_CACHE_BITS, "a slot per program");

static __always_inline struct row_cache_entry* row_cache_entry_at(__u32 cpu, __u32 slot,
                                                                  __u64 key) {
  __u32 index = (__u32)((key * 0x9E3779B97F4A7C15ull) >> (64 - ROW_CACHE_BITS));
  index |= (slot & 1) << ROW_CACHE_BITS;
  index += cpu * BPFPROF_ROW_CACHE_CPU_ENTRIES;
  return bpf_map_lookup_elem(&row_cache, &index);
}

static __always_inline struct row_cache_entry* row_cache_entry_for(const struct unwind_context* c,
                                                                   __u64 key) {
  return row_cache_entry_at(c->cpu, c->slot, key);
}

/* Whether the cache holds the row of w->pc for this process's mappings: then it is in w. The
 * cache's entries are looked up again to fill them (row_cache_fill), so that no pointer to
 * one lives across the binary searches (the verifier would walk them twice: with and
 * without it). */
static __always_inline bool row_cache_hit(struct unwind_context* c, struct unwind_walk* w) {
  const __u64 key = row_cache_key(w);
  struct row_cache_entry* cached = row_cache_entry_for(c, key);
  if (!cached || !c->mappings || !cached->generation ||
      cached->generation != c->mappings->generation || cached->key != key)
    return false;
  w->row = cached->row;
  w->elf_pc = cached->elf_pc_phase;
  return true;
}

static __always_inline void row_cache_fill(struct unwind_context* c, struct unwind_walk* w) {
  const __u64 key = row_cache_key(w);
  struct row_cache_entry* cached = row_cache_entry_for(c, key);
  if (!cached || !c->mappings) return;
  cached->generation = 0; /* empty while it is filled */
  cached->key = key;
  cached->elf_pc_phase = w->elf_pc & 15;
  cached->row = w->row;
  cached->generation = c->mappings->generation;
}

/* The registers of a frame on the fast path (fast_steps). */
struct fast_frame {
  __u64 pc;
  __u64 sp;
  __u64 bp;
  __u64 bx_slot;
  __u32 bp_known;
  __u32 bx_known;
  __u32 depth;
};

/* The caller of a return-address frame f whose row is in the cache, with words from the
 * window only; false (f unchanged) for anything else, which unwind_step's general path then
 * takes: a cache miss, a signal, root or unknown rule, a word outside the window, a frame
 * that goes nowhere. table_step's arithmetic (rule_cfa, caller_bp_known), on registers
 * rather than the walk's map value, and never refilling the window. A global function: the
 * verifier checks it once, not at each of fast_steps' unrolled calls (the row cache's slot
 * comes as cpu and slot, since a pointer to the walk's context would lose its pointers). */
__noinline int fast_step(__u32 cpu, __u32 slot, const struct unwind_walk* w, __u32 generation,
                         struct fast_frame* f) {
  if (!w || !f) return 0;
  const struct row_cache_entry* cached = row_cache_entry_at(cpu, slot, f->pc);
  if (!cached || cached->generation != generation || cached->key != f->pc) return 0;
  const struct bpfprof_unwind_rule* row = &cached->row;
  __u64 cfa, return_address, bp = f->bp;
  if (!rule_cfa(row, cached->elf_pc_phase, f->sp, f->bp, f->bp_known, &cfa) || cfa <= f->sp ||
      !window_word(w, cfa - 8, &return_address) || !return_address ||
      (row->rbp_rule == BPFPROF_RBP_AT_CFA && !window_word(w, cfa + row->rbp_offset, &bp)))
    return false;
  f->bp = bp;
  f->bp_known = caller_bp_known(row, f->bp_known);
  caller_bx(row, cfa, &f->bx_slot, &f->bx_known);
  f->sp = cfa;
  f->pc = return_address;
  return true;
}

/* Up to FAST_FRAMES return-address frames recorded and stepped through with their state in
 * registers: most of a walk's frames are row-cache hits whose words lie in the window, and
 * this path costs a fraction of the general one. The walk is left at the first frame it did
 * not step. */
#define FAST_FRAMES 8
static __always_inline void fast_steps(const struct unwind_context* c, struct unwind_walk* w,
                                       struct bpfprof_frames_event* e) {
  if (w->exact || w->bump || !c->mappings) return;
  const __u32 generation = c->mappings->generation;
  struct fast_frame f = {.pc = w->pc,
                         .sp = w->sp,
                         .bp = w->bp,
                         .bx_slot = w->bx_slot,
                         .bp_known = w->bp_known,
                         .bx_known = w->bx_known,
                         .depth = w->depth};
  for (int i = 0; i < FAST_FRAMES; i++) {
    if (f.depth >= BPFPROF_MAX_UNWOUND_FRAMES) break;
    const __u64 pc = f.pc;
    const __u64 bp = f.bp_known ? f.bp : 0;
    if (!fast_step(c->cpu, c->slot, w, generation, &f)) break;
    /* The barrier keeps the compiler from stepping a pointer into frame_bp by 8 a frame,
     * whose bound the verifier then loses. */
    __u32 index = f.depth & BPFPROF_UNWOUND_INDEX_MASK;
    asm volatile("" : "+r"(index));
    e->ips[index] = pc;
    w->frame_bp[index & BPFPROF_UNWOUND_INDEX_MASK] = bp;
    f.depth += 1;
  }
  w->pc = f.pc;
  w->sp = f.sp;
  w->bp = f.bp;
  w->bp_known = f.bp_known;
  w->bx_slot = f.bx_slot;
  w->bx_known = f.bx_known;
  w->depth = f.depth;
}

#endif
