/* The runtimes' own frames (runtimes/<name>/frames.bpf.h) for a stack event: each runtime
 * whose processes include the current one sends its frames, with the stack event's header,
 * just before it. A new runtime adds its reader's call here. */
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
  send_python_stack(header);
  send_v8_stack(header, slot, walked);
  send_hotspot_stack(header, slot, walked);
  send_ruby_stack(header);
}

#endif
