/* What every step of the in-kernel user-stack walk (bpf/unwind_user.h) shares: how a step
 * ends the walk, and the walk's context as each step sees it. A walk's registers and stack
 * window live in its map value (struct unwind_walk, bpf/maps.h). */
#ifndef BPFPROF_UNWIND_WALK_H
#define BPFPROF_UNWIND_WALK_H

#include "vmlinux.h"

#include <bpf/bpf_helpers.h>

#include "bpf/events.h"
#include "bpf/maps.h"
#include "bpf/runtime_code.h"
#include "bpf/unwind_maps.h"

/* WALK_CUT: BPFPROF_MAX_UNWOUND_FRAMES frames walked without reaching a root. */
enum walk_result { WALK_GOING = 0, WALK_ROOT = 1, WALK_FALLBACK = 2, WALK_CUT = 3 };

/* Ends the walk with `result` (and, for WALK_FALLBACK, its reason). */
static __always_inline long walk_stops(struct unwind_walk* w, __u32 result, __u32 reason) {
  w->result = result;
  w->reason = reason;
  return 1; /* ends bpf_loop */
}

/* The walk goes on at the caller's frame: its sp, and the return address into it (so not an
 * exact pc). A return address of 0 is a frame that goes nowhere. */
static __always_inline long walk_to_caller(struct unwind_walk* w, __u64 sp, __u64 return_address) {
  w->sp = sp;
  w->pc = return_address;
  w->exact = 0;
  w->bump = 0;
  return return_address ? 0 : walk_stops(w, WALK_FALLBACK, BPFPROF_FALLBACK_BAD_FRAME);
}

struct unwind_context {
  struct unwind_walk* walk;
  struct bpfprof_frames_event* event;
  struct bpfprof_process_mappings* mappings; /* NULL: not in the kernel yet */
  __u32 slot;                                /* SAMPLE_SLOT or TRACEPOINT_SLOT */
  __u32 cpu;                                 /* its part of the row cache */
  struct runtime_code runtime_code;          /* empty: none in this process (known yet) */
};

#endif
