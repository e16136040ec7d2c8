/* Java frames (HotSpot): the Java frames that the in-kernel walk stepped through
 * (runtimes/hotspot/walk.bpf.h) go to userspace just before their stack event, with its
 * header: per frame, its index among the user frames and what names it (a Method*, or a
 * blob's name). Userspace names them. Its maps are in runtimes/hotspot/maps.bpf.h, its
 * event in runtimes/hotspot/events.h. */
#ifndef BPFPROF_HOTSPOT_FRAMES_H
#define BPFPROF_HOTSPOT_FRAMES_H

#include "vmlinux.h"

#include <bpf/bpf_helpers.h>

#include "bpf/events.h"
#include "bpf/helpers.h"
#include "bpf/maps.h"
#include "runtimes/hotspot/maps.bpf.h"

/* Sends the Java frames of the stack event `sample` heads, when its user frames were walked
 * in the kernel (`walked`) in unwind_walks' `slot` through a JVM's code. */
static __always_inline void send_hotspot_stack(const struct bpfprof_event_header* sample,
                                               __u32 slot, bool walked) {
  if (!walked || !runtime_processes[BPFPROF_RUNTIME_HOTSPOT]) return;
  slot &= 1;
  struct hotspot_walk* h = bpf_map_lookup_elem(&hotspot_walks, &slot);
  if (!h || h->tid != sample->tid || (!h->event.count && !h->event.dropped)) return;
  struct bpfprof_hotspot_stack_event* e = &h->event;
  e->header = *sample;
  e->header.kind = BPFPROF_EVENT_HOTSPOT_STACK;
  const __u32 count = e->count & (2 * BPFPROF_MAX_HOTSPOT_FRAMES - 1);
  send_event(e,
             offsetof(struct bpfprof_hotspot_stack_event, frames) +
                 (__u64)count * sizeof(struct bpfprof_hotspot_frame),
             sizeof(*e), sample->pid);
  e->count = 0;
  e->dropped = 0;
}

#endif
