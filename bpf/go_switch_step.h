/* The steps of Go's CFI rows that switch stacks (BPFPROF_CFA_GO_*, bpf/unwind_table.h): the
 * caller's frame is on another stack, found through the runtime's g and m. */
#ifndef BPFPROF_GO_SWITCH_STEP_H
#define BPFPROF_GO_SWITCH_STEP_H

#include "vmlinux.h"

#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>

#include "bpf/cfi_rules.h"
#include "bpf/maps.h"
#include "bpf/stack_window.h"
#include "bpf/unwind_table.h"
#include "bpf/unwind_walk.h"

/* The sp of the goroutine frame that asmcgocall left for the system stack: its depth below
 * g.stack.hi, kept with g in the system stack's frame (BPFPROF_CFA_GO_CGO_CALL). */
static __always_inline bool go_goroutine_sp(const struct unwind_walk* w, __u64* sp) {
  __u64 slots[2]; /* depth (or sp), g */
  __u64 stack[2]; /* g.stack.lo, g.stack.hi */
  if (bpf_probe_read_user(slots, sizeof(slots), (void*)(w->sp + w->row.rbx_offset))) return false;
  if (!slots[1]) {
    *sp = slots[0];
    return slots[0] > w->sp;
  }
  if (bpf_probe_read_user(stack, sizeof(stack), (void*)slots[1])) return false;
  *sp = stack[1] - slots[0];
  return stack[0] <= *sp && *sp < stack[1];
}

/* The sched.sp of one of the thread's Gs, found through its M: g from the thread pointer, g.m,
 * then the G at `m_field` of the M: g0, whose sched.sp keeps cgocallback's frame on the system
 * stack while Go runs the callback (BPFPROF_CFA_GO_CGO_CALLBACK), or curg, the goroutine that
 * systemstack left and returns to (BPFPROF_CFA_GO_SYSTEMSTACK). */
static __always_inline bool go_sched_sp(const struct unwind_walk* w, __u64 m_field, __u64* sp) {
  const struct task_struct* task = (const struct task_struct*)w->task;
  __u64 g, m, other;
  const __u64 fsbase = BPF_CORE_READ(task, thread.fsbase);
  return fsbase && !bpf_probe_read_user(&g, 8, (void*)(fsbase + w->row.rbx_offset)) &&
         !bpf_probe_read_user(&m, 8, (void*)(g + BPFPROF_GO_G_M)) &&
         !bpf_probe_read_user(&other, 8, (void*)(m + m_field)) &&
         !bpf_probe_read_user(sp, 8, (void*)(other + BPFPROF_GO_G_SCHED_SP)) && *sp;
}

/* A switch of stacks (cgo's, systemstack's): the caller's frame is on the other stack. Where the
 * runtime's words cannot be read, the stack ends here, as Go's own traceback does. */
static __always_inline long go_switch_step(struct unwind_walk* w) {
  const struct bpfprof_unwind_rule* row = &w->row;
  __u64 sp, return_address;
  const __u64 m_field = row->cfa_rule == BPFPROF_CFA_GO_CGO_CALLBACK
                            ? BPFPROF_GO_M_G0
                            : (__u64)row->go_m_curg_words * 8;
  if (!(row->cfa_rule == BPFPROF_CFA_GO_CGO_CALL ? go_goroutine_sp(w, &sp)
                                                 : go_sched_sp(w, m_field, &sp)))
    return walk_stops(w, WALK_ROOT, 0);
  const __u64 cfa = sp + row->cfa_offset;
  if (read_stack_word(w, cfa - 8, &return_address) ||
      (row->rbp_rule == BPFPROF_RBP_AT_CFA && read_stack_word(w, cfa + row->rbp_offset, &w->bp)))
    return walk_stops(w, WALK_ROOT, 0);
  w->bp_known = caller_bp_known(row, w->bp_known);
  w->bx_known = 0;
  w->sp = cfa;
  w->pc = return_address;
  w->exact = 0;
  w->bump = 0;
  return return_address ? 0 : walk_stops(w, WALK_ROOT, 0);
}

#endif
