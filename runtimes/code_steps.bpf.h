/* The runtimes whose code the in-kernel walker steps through with their own steps
 * (bpf/runtime_code.h): its two calls, defined once for the program, one case per runtime
 * with such code. A runtime with code of its own adds its start and step here. */
#ifndef BPFPROF_RUNTIMES_CODE_STEPS_H
#define BPFPROF_RUNTIMES_CODE_STEPS_H

#include "vmlinux.h"

#include <bpf/bpf_helpers.h>

#include "bpf/events.h"
#include "bpf/maps.h"
#include "bpf/runtime_code.h"
#include "bpf/unwind_maps.h"
#include "bpf/unwind_walk.h"
#include "runtimes/hotspot/walk.bpf.h"

__noinline int runtime_code_start(struct runtime_code* code, __u32 tgid, __u32 tid, __u32 slot) {
  if (!code) return 0;
  hotspot_code_start(code, tgid, tid, slot);
  return 0;
}

__noinline int runtime_code_step(struct unwind_walk* w, __u32 runtime, __u32 slot, __u32 depth) {
  if (!w) return 1;
  switch (runtime) {
    case BPFPROF_RUNTIME_HOTSPOT:
      return hotspot_step(w, slot, depth);
    default:
      return walk_stops(w, WALK_FALLBACK, BPFPROF_FALLBACK_UNMAPPED);
  }
}

#endif
