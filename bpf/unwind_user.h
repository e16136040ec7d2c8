/* The in-kernel user-stack walker: from a thread's saved user registers, frame by frame, with
 * the compact unwind tables userspace loaded for the files the process maps
 * (bpf/unwind_table.h, bpf/unwind_maps.h). A walk that reaches a thread root yields the list
 * of return addresses; anything it cannot follow (a table not loaded yet, a row no rule
 * covers, a stack page not present) makes the caller fall back to a stack copy, unwound in
 * userspace. Its maps and their values (the walk's state, the row cache) are in bpf/maps.h.
 *
 * This is the loop; each frame is stepped by the kind of the mapping its pc lies in: a file's
 * CFI rows (bpf/cfi_step.h; the row cache, bpf/row_cache.h, skips their lookups), frame
 * pointers (bpf/frame_pointer_step.h), or a runtime's own step (bpf/runtime_code.h). */
#ifndef BPFPROF_UNWIND_USER_H
#define BPFPROF_UNWIND_USER_H

#include "vmlinux.h"

#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>

#include "bpf/cfi_step.h"
#include "bpf/events.h"
#include "bpf/frame_pointer_step.h"
#include "bpf/leaf_step.h"
#include "bpf/maps.h"
#include "bpf/row_cache.h"
#include "bpf/runtime_code.h"
#include "bpf/unwind_lookup.h"
#include "bpf/unwind_maps.h"
#include "bpf/unwind_table.h"
#include "bpf/unwind_walk.h"
#include "bpf/user_regs.h"
#include "bpf/vma_mapping.h"

/* The kind of the mapping that holds w->pc (enum bpfprof_mapping_kind): a runtime's code
 * (known from the walk's start), else the process's mapping, else one found from the pc's
 * VMA, copied into w->frame_mapping. 0 when none holds it: the walk has stopped. */
static __always_inline __u32 frame_mapping_kind(struct unwind_context* c, struct unwind_walk* w) {
  if (in_runtime_code(&c->runtime_code, w->pc)) return BPFPROF_MAPPING_RUNTIME_CODE;
  const struct bpfprof_exec_mapping* known = find_mapping(c->mappings, w->pc);
  if (known && known->kind != BPFPROF_MAPPING_FALLBACK) {
    w->frame_mapping = *known;
    w->frame_mapping_from_vma = 0;
  } else if (mapping_from_vma(w)) {
    w->frame_mapping = w->vma_mapping;
    w->frame_mapping_from_vma = 1;
  } else {
    walk_stops(w, WALK_FALLBACK, known ? BPFPROF_FALLBACK_NOT_LOADED : BPFPROF_FALLBACK_UNMAPPED);
    return 0;
  }
  return w->frame_mapping.kind;
}

/* A frame in a mapping with a table (w->frame_mapping): the row covering its pc, then the step
 * by it; the row goes into the cache. A leaf that no row covers steps as leaf_step.h says. */
static __always_inline long cfi_row_step(struct unwind_context* c, struct unwind_walk* w,
                                         struct bpfprof_frames_event* e, __u32 depth) {
  const struct bpfprof_exec_mapping* m = &w->frame_mapping;
  /* A return address is one past its call, which may be the last instruction of a
   * function: the call site's row is that of the byte before. */
  __u64 elf_pc = (w->exact ? w->pc : w->pc - 1) - m->bias;
  const struct bpfprof_unwind_rule* row = find_row(m, elf_pc);
  if ((!row || row->cfa_rule == BPFPROF_CFA_UNKNOWN) && depth == 0 && w->exact) {
    if (is_clone_child(w)) return walk_stops(w, WALK_ROOT, 0);
    /* A thread in a system call whose FDE ends before it: the syscall's row (__restore_rt);
     * else (clone's parent) a leaf that pushed nothing. */
    if (follows_syscall(w->pc)) {
      elf_pc -= 1;
      row = find_row(m, elf_pc);
    }
    if (!row || row->cfa_rule == BPFPROF_CFA_UNKNOWN) return leaf_step_without_rule(w, c->mappings);
  }
  if (!row) return walk_stops(w, WALK_FALLBACK, BPFPROF_FALLBACK_UNKNOWN_ROW);
  w->row = *row;
  w->elf_pc = elf_pc;
  /* A leaf without a rule goes its own way above, every time. */
  if (row->cfa_rule != BPFPROF_CFA_UNKNOWN && !w->frame_mapping_from_vma) row_cache_fill(c, w);
  return table_step(w, e, depth);
}

/* A frame in runtime code that runs on its VM loop's frame (runtime_code.by_rule): its row is
 * the loop's, as if the pc were the loop's, its CFA higher where the code has moved sp. False
 * for any other frame. Not cached: the cache is of file rows. */
static __always_inline bool runtime_code_row(struct unwind_context* c, struct unwind_walk* w) {
  const struct runtime_code* code = &c->runtime_code;
  if (!code->by_rule || !in_runtime_code(code, w->pc)) return false;
  const __u64 pc = w->exact ? w->pc : w->pc - 1;
  w->row = code->rule;
  if (code->moved_low <= pc && pc < code->moved_high) w->row.cfa_offset += code->moved_by;
  w->elf_pc = 0;
  return true;
}

/* bpf_loop's callback: records the current frame's pc, then steps to its caller. */
static long unwind_step(__u64 index, void* context) {
  struct unwind_context* c = context;
  struct unwind_walk* w = c->walk;
  struct bpfprof_frames_event* e = c->event;
  fast_steps(c, w, e);
  const __u32 depth = w->depth;
  if (depth >= BPFPROF_MAX_UNWOUND_FRAMES) return walk_stops(w, WALK_CUT, 0);
  e->ips[depth & BPFPROF_UNWOUND_INDEX_MASK] = w->pc + w->bump;
  w->frame_bp[depth & BPFPROF_UNWOUND_INDEX_MASK] = w->bp_known ? w->bp : 0;
  w->depth = depth + 1;
  /* One call of table_step for the rows that need no lookup: each inlined copy is verified. */
  if (row_cache_hit(c, w) || runtime_code_row(c, w)) return table_step(w, e, depth);
  switch (frame_mapping_kind(c, w)) {
    case 0:
      return 1; /* stopped */
    case BPFPROF_MAPPING_RUNTIME_CODE:
      /* a global's result is any int */
      return runtime_code_step(w, c->runtime_code.runtime, c->slot, depth) ? 1 : 0;
    case BPFPROF_MAPPING_FRAME_POINTERS:
      w->frame_bp[depth & BPFPROF_UNWOUND_INDEX_MASK] |= FRAME_BP_ANONYMOUS_CODE;
      return frame_pointer_step(w);
    case BPFPROF_MAPPING_TABLE:
      return cfi_row_step(c, w, e, depth);
    default:
      return walk_stops(w, WALK_FALLBACK, BPFPROF_FALLBACK_NOT_LOADED);
  }
}

static __always_inline void count_unwind_outcome(__u32 reason) {
  __u64* count = bpf_map_lookup_elem(&unwind_fallbacks, &reason);
  if (count) *count += 1; /* per CPU: no other writer */
}

/* Walks the user stack of `task` into e->ips and sets e->head.user_depth. True when the walk
 * reached a thread root or the depth limit (or the task has no user context); false when the
 * sample must fall back to a stack copy (the reason counted). `slot`: SAMPLE_SLOT or
 * TRACEPOINT_SLOT. */
static __always_inline bool walk_user_stack(struct task_struct* task, __u32 tgid, __u32 slot,
                                            struct bpfprof_frames_event* e) {
  e->head.user_depth = 0;
  if (!BPF_CORE_READ(task, mm)) return true; /* a kernel thread (read: stack_copy.h says why) */
  struct pt_regs* regs = (struct pt_regs*)bpf_task_pt_regs(task);
  if (!regs) return true;
  /* Without it (the process's first milliseconds) every frame's table is found from its VMA. */
  struct bpfprof_process_mappings* pm = bpf_map_lookup_elem(&unwind_processes, &tgid);
  struct unwind_walk* w = bpf_map_lookup_elem(&unwind_walks, &slot);
  if (!w) return false;
  w->pc = user_pc(regs);
  w->sp = regs->sp;
  w->bp = regs->bp;
  w->leaf_ax = regs->ax;
  w->leaf_di = regs->di;
  w->leaf_bx = regs->bx;
  w->bx_slot = 0;
  w->bx_known = 1;
  w->depth = 0;
  w->result = WALK_GOING;
  w->reason = 0;
  w->exact = 1;
  w->bump = 0;
  w->bp_known = 1;
  w->window_len = 0;
  w->vma_mapping.end = 0;
  w->jit_frame_pointers = pm && (pm->flags & BPFPROF_PROCESS_JIT_FRAME_POINTERS);
  w->task = (__u64)task;
  struct unwind_context c = {
      .walk = w, .event = e, .mappings = pm, .slot = slot, .cpu = bpf_get_smp_processor_id()};
  runtime_code_start(&c.runtime_code, tgid, task->pid, slot);
  bpf_loop(BPFPROF_MAX_UNWOUND_FRAMES + 1, unwind_step, &c, 0);
  /* Each step records a frame: the loop ends at the depth limit at the latest. */
  if (w->result == WALK_GOING) w->result = WALK_CUT;
  if (w->result == WALK_FALLBACK) {
    count_unwind_outcome(pm ? w->reason : BPFPROF_FALLBACK_NO_PROCESS);
    return false;
  }
  if (w->result == WALK_CUT) count_unwind_outcome(BPFPROF_WALK_CUT_AT_DEPTH);
  e->head.user_depth = w->depth;
  return true;
}

/* Walks the current task's user stack into frames_scratch's `slot` (walk_user_stack). A
 * global function: the verifier checks it once per program, on its own, instead of once
 * for each state its callers reach it in (sched_switch's paths reached it twice). */
__noinline int unwind_current_user_stack(__u32 tgid, __u32 slot) {
  slot &= 1;
  struct bpfprof_frames_event* e = bpf_map_lookup_elem(&frames_scratch, &slot);
  if (!e) return 0;
  return walk_user_stack(bpf_get_current_task_btf(), tgid, slot, e);
}

#endif
