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

/* `walked` (0 or 1): the user frames were walked in the kernel, in unwind_walks' `slot`
 * (SAMPLE_SLOT or TRACEPOINT_SLOT). A global function, which the verifier checks once for any
 * arguments, where each caller's state would have it checked again. */
__noinline int send_runtime_stacks(const struct bpfprof_event_header* header, __u32 slot,
                                   __u32 walked);

#endif
