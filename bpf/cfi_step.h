/* The step through a frame with its CFI row (bpf/unwind_table.h): the CFA by the row's rule,
 * the return address below it, the caller's rbp and rbx where the row says; and the rows
 * whose frames are not plain calls: a signal frame, vfork's return address in rdi, Go's
 * switches of stacks, a thread's root. */
#ifndef BPFPROF_CFI_STEP_H
#define BPFPROF_CFI_STEP_H

#include "vmlinux.h"

#include <bpf/bpf_helpers.h>

#include "bpf/cfi_rules.h"
#include "bpf/events.h"
#include "bpf/go_switch_step.h"
#include "bpf/maps.h"
#include "bpf/stack_window.h"
#include "bpf/unwind_maps.h"
#include "bpf/unwind_table.h"
#include "bpf/unwind_walk.h"

/* __restore_rt: the interrupted frame's registers are in the ucontext at sp; its pc is exact.
 * The trampoline's own frame, already recorded, is nudged like the interrupted pc (as the
 * userspace unwinder does, so both modes give the same frames). */
static __always_inline long signal_step(struct unwind_walk* w, struct bpfprof_frames_event* e,
                                        __u32 depth) {
  __u64 rip, rsp, rbp;
  if (read_stack_word(w, w->sp + BPFPROF_SIGFRAME_RIP, &rip) ||
      read_stack_word(w, w->sp + BPFPROF_SIGFRAME_RSP, &rsp) ||
      read_stack_word(w, w->sp + BPFPROF_SIGFRAME_RBP, &rbp))
    return walk_stops(w, WALK_FALLBACK, BPFPROF_FALLBACK_READ);
  /* The leaf (a thread in rt_sigreturn) is exact. */
  if (depth) e->ips[depth & BPFPROF_UNWOUND_INDEX_MASK] += 1;
  w->bx_slot = w->sp + BPFPROF_SIGFRAME_RBX;
  w->bx_known = 1;
  w->pc = rip;
  w->sp = rsp;
  w->bp = rbp;
  w->bp_known = 1;
  w->exact = 1;
  w->bump = 1;
  return rip ? 0 : walk_stops(w, WALK_FALLBACK, BPFPROF_FALLBACK_BAD_FRAME);
}

/* The CFA of a BPFPROF_CFA_RBX frame: the frame's rbx, from the leaf's registers or where a
 * callee saved it. False if it is not known or cannot be read. */
static __always_inline bool rbx_cfa(struct unwind_walk* w, __u64* cfa) {
  __u64 bx = w->leaf_bx;
  if (!w->bx_known || (w->bx_slot && read_stack_word(w, w->bx_slot, &bx))) return false;
  *cfa = bx + w->row.cfa_offset;
  return true;
}

/* vfork between its pop of the return address into rdi and its push back: only the innermost
 * frame has rdi (the registers of the sample). The caller's sp is the CFA, which may equal sp
 * (nothing is on the stack); bp is unchanged. */
static __always_inline long return_in_rdi_step(struct unwind_walk* w, __u32 depth) {
  if (depth != 0 || !w->exact) return walk_stops(w, WALK_FALLBACK, BPFPROF_FALLBACK_UNKNOWN_ROW);
  return walk_to_caller(w, w->sp + w->row.cfa_offset, w->leaf_di);
}

/* One step with the frame's row (bpf/unwind_table.h): CFA, return address, caller's rbp. */
static __always_inline long table_step(struct unwind_walk* w, struct bpfprof_frames_event* e,
                                       __u32 depth) {
  const struct bpfprof_unwind_rule* row = &w->row;
  if (row->cfa_rule == BPFPROF_CFA_ROOT) return walk_stops(w, WALK_ROOT, 0);
  if (row->cfa_rule == BPFPROF_CFA_SIGNAL) return signal_step(w, e, depth);
  if (row->cfa_rule == BPFPROF_CFA_RSP_RETURN_IN_RDI) return return_in_rdi_step(w, depth);
  if (row->cfa_rule >= BPFPROF_CFA_GO_CGO_CALL && row->cfa_rule <= BPFPROF_CFA_GO_SYSTEMSTACK)
    return go_switch_step(w);
  __u64 cfa;
  if (row->cfa_rule == BPFPROF_CFA_RBX ? !rbx_cfa(w, &cfa)
                                       : !rule_cfa(row, w->elf_pc, w->sp, w->bp, w->bp_known, &cfa))
    return walk_stops(w, WALK_FALLBACK,
                      row->cfa_rule == BPFPROF_CFA_RBP || row->cfa_rule == BPFPROF_CFA_GO_FRAME_BASE
                          ? BPFPROF_FALLBACK_FRAME_POINTER
                          : BPFPROF_FALLBACK_UNKNOWN_ROW);
  /* A caller's frame lies above its callee's on the same stack: anything else is a rule gone
   * wrong, and a walk that could loop (the depth bounds a walk across stacks). */
  if (cfa <= w->sp && row->cfa_rule != BPFPROF_CFA_GO_FRAME_BASE)
    return walk_stops(w, WALK_FALLBACK, BPFPROF_FALLBACK_BAD_FRAME);
  __u64 return_address;
  if (read_stack_word(w, cfa - 8, &return_address))
    return walk_stops(w, WALK_FALLBACK, BPFPROF_FALLBACK_READ);
  if (row->rbp_rule == BPFPROF_RBP_AT_CFA && read_stack_word(w, cfa + row->rbp_offset, &w->bp))
    return walk_stops(w, WALK_FALLBACK, BPFPROF_FALLBACK_READ);
  w->bp_known = caller_bp_known(row, w->bp_known);
  caller_bx(row, cfa, &w->bx_slot, &w->bx_known);
  return walk_to_caller(w, cfa, return_address);
}

#endif
