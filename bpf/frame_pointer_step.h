/* The step through a frame of code without a table (JIT code; a file without .eh_frame): by
 * its frame pointer. */
#ifndef BPFPROF_FRAME_POINTER_STEP_H
#define BPFPROF_FRAME_POINTER_STEP_H

#include "vmlinux.h"

#include <bpf/bpf_helpers.h>

#include "bpf/maps.h"
#include "bpf/stack_window.h"
#include "bpf/unwind_maps.h"
#include "bpf/unwind_walk.h"

/* Code without a table (JIT): the saved rbp and return address sit at rbp. */
static __always_inline long frame_pointer_step(struct unwind_walk* w) {
  if (!w->bp_known || w->bp < w->sp || w->bp == 0)
    return walk_stops(w, WALK_FALLBACK, BPFPROF_FALLBACK_FRAME_POINTER);
  __u64 saved_bp, return_address;
  if (read_stack_word(w, w->bp, &saved_bp) || read_stack_word(w, w->bp + 8, &return_address))
    return walk_stops(w, WALK_FALLBACK, BPFPROF_FALLBACK_READ);
  const __u64 caller_sp = w->bp + 16;
  w->bp = saved_bp;
  w->bx_known = 0; /* code without a table: where it keeps rbx is not known */
  return walk_to_caller(w, caller_sp, return_address);
}

#endif
