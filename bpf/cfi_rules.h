/* The arithmetic of a frame's CFI row (bpf/unwind_table.h): its CFA, and what the caller's
 * rbp and rbx are after the step. On values, not on the walk's map value, so that both the
 * general step (bpf/cfi_step.h) and the row cache's fast path (bpf/row_cache.h) use it. */
#ifndef BPFPROF_CFI_RULES_H
#define BPFPROF_CFI_RULES_H

#include "vmlinux.h"

#include <bpf/bpf_helpers.h>

#include "bpf/unwind_table.h"

/* The CFA by a rule that computes it (RSP, RBP with rbp known, PLT); false for the others.
 * Only the ELF address's low 4 bits matter (a PLT slot's). */
static __always_inline bool rule_cfa(const struct bpfprof_unwind_rule* row, __u64 elf_pc, __u64 sp,
                                     __u64 bp, __u32 bp_known, __u64* cfa) {
  switch (row->cfa_rule) {
    case BPFPROF_CFA_RSP:
      *cfa = sp + row->cfa_offset;
      return true;
    case BPFPROF_CFA_RBP:
    case BPFPROF_CFA_GO_FRAME_BASE:
      *cfa = bp + row->cfa_offset;
      return bp_known;
    case BPFPROF_CFA_PLT:
      *cfa = sp + row->cfa_offset + ((elf_pc & 15) >= 11 ? 8 : 0);
      return true;
    default:
      return false;
  }
}

/* Where the caller's rbx is after a step by the row's rbx rule: an address, not the value
 * (read only where a frame's CFA needs it). */
static __always_inline void caller_bx(const struct bpfprof_unwind_rule* row, __u64 cfa,
                                      __u64* bx_slot, __u32* bx_known) {
  if (row->rbx_rule == BPFPROF_RBP_AT_CFA) {
    *bx_slot = cfa + row->rbx_offset;
    *bx_known = 1;
  } else if (row->rbx_rule != BPFPROF_RBP_SAME) {
    *bx_known = 0;
  }
}

/* Whether the caller's rbp is known after a step by the row's rbp rule. */
static __always_inline __u32 caller_bp_known(const struct bpfprof_unwind_rule* row,
                                             __u32 bp_known) {
  return row->rbp_rule == BPFPROF_RBP_AT_CFA ? 1 : row->rbp_rule == BPFPROF_RBP_SAME ? bp_known : 0;
}

#endif
