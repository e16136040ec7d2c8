/* The runtimes' own frames for a stack event: each runtime whose processes include the
 * current one sends its frames, with the stack event's header, just before it. The program
 * defines send_runtime_stacks once, from bpf/runtime_list.h and the runtimes' readers
 * (runtimes/kernel_side.bpf.h); the stack events (bpf/stack_events.h) only call it, so that
 * bpf/ names no runtime. */
#ifndef BPFPROF_RUNTIME_STACKS_H
#define BPFPROF_RUNTIME_STACKS_H

#include "vmlinux.h"

#include <bpf/bpf_helpers.h>

#include "bpf/events.h"

/* `walked`: the user frames were walked in the kernel, in unwind_walks' `slot`. Inlined where
 * it is called, as any helper of this program; a header compiled alone (style.bpf_headers)
 * sees its declaration only. */
#pragma clang diagnostic push
#pragma clang diagnostic ignored "-Wundefined-internal"
static __always_inline void send_runtime_stacks(const struct bpfprof_event_header* header,
                                                __u32 slot, bool walked);
#pragma clang diagnostic pop

#endif
