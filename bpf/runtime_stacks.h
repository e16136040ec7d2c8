/* The runtimes' own frames (runtimes/<name>/frames.bpf.h) for a stack event: each runtime
 * whose processes include the current one sends its frames, with the stack event's header,
 * just before it: each runtime of bpf/runtime_list.h has send_<id>_stack(header, slot,
 * walked) in its reader. A new runtime adds its reader's include here. */
#ifndef BPFPROF_RUNTIME_STACKS_H
#define BPFPROF_RUNTIME_STACKS_H

#include "vmlinux.h"

#include <bpf/bpf_helpers.h>

#include "bpf/events.h"
#include "runtimes/hotspot/frames.bpf.h"
#include "runtimes/python/frames.bpf.h"
#include "runtimes/ruby/frames.bpf.h"
#include "runtimes/v8/frames.bpf.h"

/* `walked`: the user frames were walked in the kernel, in unwind_walks' `slot`. */
static __always_inline void send_runtime_stacks(const struct bpfprof_event_header* header,
                                                __u32 slot, bool walked) {
#define BPFPROF_SEND_RUNTIME_STACK(ID, id, Kind, language, colour, event) \
  send_##id##_stack(header, slot, walked);
  BPFPROF_RUNTIME_LIST(BPFPROF_SEND_RUNTIME_STACK)
#undef BPFPROF_SEND_RUNTIME_STACK
}

#endif
