/* The in-kernel walk through the BEAM's JIT code (OTP 25's x86-64 BeamAsm): the walker reaches
 * it by the frame's mapping (bpf/runtime_code.h), from runtimes/kernel_side.bpf.h. JIT code
 * has neither CFI nor (by default) frame pointers; its frames are on the Erlang process's own
 * stack, at the top of its heap block [heap, hend), and each holds its caller's return
 * address (a CP: untagged, 4-aligned, into JIT code) above its y slots, which hold tagged
 * terms. So from E, the Erlang stack pointer, the next word that is a CP is the caller's:
 *   - a JIT frame running Erlang code has sp = E;
 *   - JIT code that called C did so with sp = R (the scheduler's C stack, esdp->registers),
 *     having saved E in rbp or in the process's `stop`: the leave after the call (`mov
 *     rsp,rbp` or `mov rsp,[r13+0x58]`) says which;
 *   - beam_normal_exit, the CP at every process stack's bottom, and the scheduler loop
 *     (the JIT's process_main) go to the thread's root: the return address into
 *     sched_thread_func that process_main was entered with, just above R.
 * The frames crossed are recorded as the walker records every frame; userspace names them.
 * Every read is of the profiled process's memory: an E outside the stack, a CP not found
 * within BEAM_MAX_FRAME_WORDS or a root slot without the root make the walk fall back. */
#ifndef BPFPROF_BEAM_WALK_H
#define BPFPROF_BEAM_WALK_H

#include "vmlinux.h"

#include <bpf/bpf_helpers.h>

#include "bpf/events.h"
#include "bpf/maps.h"
#include "bpf/runtime_code.h"
#include "bpf/stack_window.h"
#include "bpf/unwind_maps.h"
#include "bpf/unwind_walk.h"
#include "runtimes/beam/maps.bpf.h"

/* Words looked at for the next CP: a frame's y slots, at most. */
#define BEAM_MAX_FRAME_WORDS 256
/* Words looked at in one walk (a deep recursion ends at the walker's depth limit first). */
#define BEAM_MAX_WALK_WORDS 8192
/* The bytes after a return address from C in which its leave lies (after a result's store, a
 * reduction count's, or a BIF's test of its result). */
#define BEAM_LEAVE_WINDOW 64
#define BEAM_ROOT_SLOT_WORDS 8

static __always_inline bool in_beam_jit(const struct bpfprof_beam_process* p, __u64 pc) {
  for (int i = 0; i < BPFPROF_BEAM_JIT_BLOCKS; i++)
    if (i < p->jit_blocks && p->jit_low[i] <= pc && pc < p->jit_high[i]) return true;
  return false;
}

/* To the thread's root: sched_thread_func's frame, by its CFI. */
static __always_inline long beam_root_step(struct unwind_walk* w, const struct beam_walk* b) {
  const __u64 low = b->registers + b->process.root_slot_low;
  __u64 words[BEAM_ROOT_SLOT_WORDS];
  if (bpf_probe_read_user(words, sizeof(words), (void*)low))
    return walk_stops(w, WALK_FALLBACK, BPFPROF_FALLBACK_READ);
  for (int i = 0; i < BEAM_ROOT_SLOT_WORDS; i++) {
    if (words[i] == b->process.root_return) {
      w->bp_known = 0; /* the JIT's; the CFI row restores the C caller's */
      w->bx_known = 0;
      return walk_to_caller(w, low + i * 8 + 8, words[i]);
    }
  }
  return walk_stops(w, WALK_FALLBACK, BPFPROF_FALLBACK_BAD_FRAME);
}

/* E for JIT code that called C (sp = R), from the leave after its return address: `mov
 * rsp,rbp` (48 89 ec) or `mov rsp,[r13+0x58]` (49 8b 65 58, the process's stop); 0 when
 * neither is found, or rbp is not known. With frame pointers (FP_RA), stop always. */
static __always_inline bool in_beam_stack(const struct beam_walk* b, __u64 e) {
  return b->heap <= e && e < b->hend && !(e & 7);
}

static __always_inline __u64 beam_leave_e(const struct unwind_walk* w, const struct beam_walk* b) {
  if (b->process.frame_layout) return b->stop;
  __u8 code[BEAM_LEAVE_WINDOW] = {};
  if (bpf_probe_read_user(code, BEAM_LEAVE_WINDOW, (void*)w->pc)) return 0;
  for (int i = 0; i + 4 <= BEAM_LEAVE_WINDOW; i++) {
    __u32 bytes;
    __builtin_memcpy(&bytes, code + i, 4);
    if ((bytes & 0xffffff) == 0xec8948) return w->bp_known ? w->bp : 0; /* 48 89 ec */
    if (bytes == 0x58658b49) return b->stop;                            /* 49 8b 65 58 */
  }
  return 0;
}

struct beam_scan {
  struct unwind_walk* w;
  const struct beam_walk* b;
  __u64 at;    /* the word looked at */
  __u64 found; /* the CP's slot, 0 until found */
  __u64 cp;
  bool failed;
};

static long beam_scan_word(__u64 index, void* context) {
  struct beam_scan* s = context;
  if (s->at >= s->b->hend) return 1;
  __u64 word;
  if (read_stack_word(s->w, s->at, &word)) {
    s->failed = true;
    return 1;
  }
  if (!(word & 3) && in_beam_jit(&s->b->process, word)) {
    s->found = s->at;
    s->cp = word;
    return 1;
  }
  s->at += 8;
  return 0;
}

/* E as the leave says; where that is outside the process's stack, the other place the JIT
 * keeps E, if it is inside: a garbage collection after a BIF moves the stack to a new heap
 * block and leaves by rbp, which the collector updated, while the stop read says the old. */
static __always_inline __u64 beam_saved_e(const struct unwind_walk* w, const struct beam_walk* b) {
  const __u64 e = beam_leave_e(w, b);
  if (in_beam_stack(b, e)) return e;
  if (in_beam_stack(b, b->stop)) return b->stop;
  if (w->bp_known && in_beam_stack(b, w->bp)) return w->bp;
  return e;
}

/* From E up, the next CP: the caller's frame. */
static __always_inline long beam_scan_step(struct unwind_walk* w, struct beam_walk* b, __u64 e) {
  if (!in_beam_stack(b, e)) return walk_stops(w, WALK_FALLBACK, BPFPROF_FALLBACK_BAD_FRAME);
  if (b->words_scanned >= BEAM_MAX_WALK_WORDS) return walk_stops(w, WALK_CUT, 0);
  struct beam_scan s = {.w = w, .b = b, .at = e};
  bpf_loop(BEAM_MAX_FRAME_WORDS, beam_scan_word, &s, 0);
  b->words_scanned += (s.at - e) / 8 + 1;
  if (s.failed) return walk_stops(w, WALK_FALLBACK, BPFPROF_FALLBACK_READ);
  if (!s.found) return walk_stops(w, WALK_FALLBACK, BPFPROF_FALLBACK_BAD_FRAME);
  return walk_to_caller(w, s.found + 8, s.cp);
}

/* One step through a frame whose pc lies in an emulator's JIT code (beam_code_start), in
 * beam_walks' `slot`. 1 ends the walk, as walk_stops. */
static __always_inline long beam_step(struct unwind_walk* w, __u32 slot, __u32 depth) {
  slot &= 1;
  struct beam_walk* b = bpf_map_lookup_elem(&beam_walks, &slot);
  if (!b || !b->registers) return walk_stops(w, WALK_FALLBACK, BPFPROF_FALLBACK_UNMAPPED);
  const struct bpfprof_beam_process* p = &b->process;
  const __u64 pc = w->exact ? w->pc : w->pc - 1;
  const bool in_loop = p->process_main_low <= pc && pc < p->process_main_high;
  if (w->pc == p->normal_exit || (in_loop && w->sp == b->registers)) return beam_root_step(w, b);
  if (in_loop || !b->process_address)
    return walk_stops(w, WALK_FALLBACK, BPFPROF_FALLBACK_BAD_FRAME);
  __u64 e;
  if (b->heap <= w->sp && w->sp < b->hend)
    e = w->sp;
  else if (w->sp == b->registers)
    e = beam_saved_e(w, b);
  else
    return walk_stops(w, WALK_FALLBACK, BPFPROF_FALLBACK_BAD_FRAME);
  return beam_scan_step(w, b, e); /* one copy: each is verified */
}

/* A walk of thread `tid` of process `tgid` in beam_walks' `slot` starts: if the process is an
 * emulator, its JIT blocks are `code`, and for a normal scheduler its C stack pointer and the
 * process it runs are read for the walk. */
static __always_inline void beam_code_start(struct runtime_code* code, __u32 tgid, __u32 tid,
                                            __u32 slot) {
  if (!runtime_processes[BPFPROF_RUNTIME_BEAM]) return;
  const struct bpfprof_beam_process* p = bpf_map_lookup_elem(&beam_processes, &tgid);
  if (!p) return;
  slot &= 1;
  struct beam_walk* b = bpf_map_lookup_elem(&beam_walks, &slot);
  if (!b) return;
  b->process = *p;
  b->tid = tid;
  b->words_scanned = 0;
  b->registers = 0;
  b->process_address = 0;
  for (int i = 0; i < BPFPROF_BEAM_JIT_BLOCKS && i < RUNTIME_CODE_RANGES; i++)
    if (i < p->jit_blocks) runtime_code_add(code, p->jit_low[i], p->jit_high[i]);
  code->runtime = BPFPROF_RUNTIME_BEAM;
  const __u64 found = beam_scheduler_of(p, tid);
  const __u64 esdp = found & ~BEAM_SCHEDULER_KIND_MASK;
  if ((found & BEAM_SCHEDULER_KIND_MASK) != BPFPROF_BEAM_NORMAL) return;
  b->registers = read_user_word(esdp + p->esdp_registers);
  const __u64 c_p = read_user_word(esdp + p->esdp_current_process);
  if (!c_p) return;
  b->heap = read_user_word(c_p + p->process_heap);
  b->hend = read_user_word(c_p + p->process_hend);
  b->stop = read_user_word(c_p + p->process_stop);
  if (b->heap && b->heap < b->hend) b->process_address = c_p;
}

#endif
