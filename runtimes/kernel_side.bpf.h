/* The runtimes' kernel sides, put together for the program (bpf/profiler.bpf.c): each
 * runtime's reader of its frames (runtimes/<name>/frames.bpf.h, with its maps), the stack
 * events' call to them (send_runtime_stacks, bpf/runtime_stacks.h), and the walker's steps
 * through the code of the runtimes that have code of their own (runtime_code_start and
 * runtime_code_step, bpf/runtime_code.h). A new runtime adds its reader's include here, and,
 * if the walker steps through its code, its start and step. */
#ifndef BPFPROF_RUNTIMES_KERNEL_SIDE_H
#define BPFPROF_RUNTIMES_KERNEL_SIDE_H

#include "vmlinux.h"

#include <bpf/bpf_helpers.h>

#include "bpf/events.h"
#include "bpf/maps.h"
#include "bpf/runtime_code.h"
#include "bpf/runtime_list.h"
#include "bpf/runtime_stacks.h"
#include "bpf/unwind_maps.h"
#include "bpf/unwind_walk.h"
#include "runtimes/beam/frames.bpf.h"
#include "runtimes/beam/walk.bpf.h"
#include "runtimes/golabels/frames.bpf.h"
#include "runtimes/hotspot/frames.bpf.h"
#include "runtimes/hotspot/walk.bpf.h"
#include "runtimes/perl/frames.bpf.h"
#include "runtimes/php/frames.bpf.h"
#include "runtimes/python/frames.bpf.h"
#include "runtimes/ruby/frames.bpf.h"
#include "runtimes/v8/frames.bpf.h"

/* Userspace keeps a runtime's frames per thread by their event's header (runtimes/kit/
 * pending_stacks.h): every runtime's event begins with it, and ends with its frames. */
#define BPFPROF_RUNTIME_EVENT_HEADER_FIRST(ID, id, Kind, language, colour, event)      \
  _Static_assert(__builtin_offsetof(struct bpfprof_##id##_stack_event, header) == 0 && \
                     sizeof(((struct bpfprof_##id##_stack_event*)0)->frames) > 0,      \
                 "bpfprof_" #id "_stack_event begins with its header and ends with frames");
BPFPROF_RUNTIME_LIST(BPFPROF_RUNTIME_EVENT_HEADER_FIRST)
#undef BPFPROF_RUNTIME_EVENT_HEADER_FIRST

/* Whether the walker object leaves `runtime`'s reader out: the lite one, for the runtimes of
 * BPFPROF_RUNTIMES_READ_LATER (bpf/runtime_list.h). Constant: the calls it guards go. */
static __always_inline bool reader_left_out(__u32 runtime) {
#ifdef BPFPROF_WITHOUT_LATE_READERS
#define BPFPROF_IS_RUNTIME(ID) || runtime == BPFPROF_RUNTIME_##ID
  return false BPFPROF_RUNTIMES_READ_LATER(BPFPROF_IS_RUNTIME);
#undef BPFPROF_IS_RUNTIME
#else
  return false;
#endif
}

/* Each runtime of bpf/runtime_list.h has send_<id>_stack(header, slot, walked) in its
 * reader. Each is called through a global function of its own: the verifier checks a global
 * function once, for any arguments, instead of once for each state its caller reaches it in
 * (the readers one after another, inlined, were 40% of each walker program's instructions). */
#define BPFPROF_RUNTIME_STACK_FUNCTION(ID, id, Kind, language, colour, event)                      \
  __noinline int send_##id##_stack_alone(const struct bpfprof_event_header* header, __u32 slot,    \
                                         __u32 walked) {                                           \
    /* Each argument used, so that the compiler passes it even where the reader does not. */       \
    if (header && slot <= TRACEPOINT_SLOT && walked <= 1) send_##id##_stack(header, slot, walked); \
    return 0;                                                                                      \
  }
BPFPROF_RUNTIME_LIST(BPFPROF_RUNTIME_STACK_FUNCTION)
#undef BPFPROF_RUNTIME_STACK_FUNCTION

__noinline int send_runtime_stacks(const struct bpfprof_event_header* header, __u32 slot,
                                   __u32 walked) {
#define BPFPROF_SEND_RUNTIME_STACK(ID, id, Kind, language, colour, event) \
  if (!reader_left_out(BPFPROF_RUNTIME_##ID)) send_##id##_stack_alone(header, slot, walked);
  BPFPROF_RUNTIME_LIST(BPFPROF_SEND_RUNTIME_STACK)
#undef BPFPROF_SEND_RUNTIME_STACK
  return 0;
}

__noinline int runtime_code_start(struct runtime_code* code, __u32 tgid, __u32 tid, __u32 slot) {
  if (!code) return 0;
  if (!reader_left_out(BPFPROF_RUNTIME_HOTSPOT)) hotspot_code_start(code, tgid, tid, slot);
  php_code_start(code, tgid);
  if (!reader_left_out(BPFPROF_RUNTIME_BEAM)) beam_code_start(code, tgid, tid, slot);
  return 0;
}

__noinline int runtime_code_step(struct unwind_walk* w, __u32 runtime, __u32 slot, __u32 depth) {
  if (!w) return 1;
  if (reader_left_out(runtime)) return walk_stops(w, WALK_FALLBACK, BPFPROF_FALLBACK_UNMAPPED);
  switch (runtime) {
    case BPFPROF_RUNTIME_HOTSPOT:
      return hotspot_step(w, slot, depth);
    case BPFPROF_RUNTIME_BEAM:
      return beam_step(w, slot, depth);
    default:
      return walk_stops(w, WALK_FALLBACK, BPFPROF_FALLBACK_UNMAPPED);
  }
}

#endif
