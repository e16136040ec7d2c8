/* Code whose frames only a runtime's own step knows (BPFPROF_MAPPING_RUNTIME_CODE): a JIT's
 * code cache that has neither call-frame information nor frame pointers, whose frames the
 * runtime's own structures describe. The walker reaches such a frame by its mapping's kind,
 * as it reaches frame-pointer code, and never names the runtime: at a walk's start the
 * runtimes say where their code lies in the walked process (runtime_code_start), and a frame
 * whose pc lies there is stepped by runtime_code_step, or by one CFI row the runtime gives
 * (by_rule). The program defines both once, from the runtimes that have such code
 * (runtimes/kernel_side.bpf.h). */
#ifndef BPFPROF_RUNTIME_CODE_H
#define BPFPROF_RUNTIME_CODE_H

#include "vmlinux.h"

#include <bpf/bpf_helpers.h>

#include "bpf/maps.h"
#include "bpf/unwind_table.h"

/* A JIT may put its code in several blocks, with other mappings between them. */
#define RUNTIME_CODE_RANGES 8

struct runtime_code {
  __u64 low[RUNTIME_CODE_RANGES]; /* [low, high): the code's addresses, `ranges` of them */
  __u64 high[RUNTIME_CODE_RANGES];
  __u32 ranges;
  __u32 runtime; /* enum bpfprof_runtime: whose step */
  /* Code that runs on its VM loop's native frame, entered by jumps (a JIT whose code keeps
   * the loop's stack pointer): every frame there is stepped by `rule`, the loop's own CFI row
   * for its body, and the runtime has no step of its own. */
  __u32 by_rule;
  struct bpfprof_unwind_rule rule;
  /* by_rule: a stretch of that code where sp is `moved_by` below the loop's (a stub that saves
   * registers around a call); its CFA is that much higher. Empty for none. */
  __u64 moved_low;
  __u64 moved_high;
  __u32 moved_by;
  __u32 pad;
};

static __always_inline bool in_runtime_code(const struct runtime_code* code, __u64 pc) {
  for (int i = 0; i < RUNTIME_CODE_RANGES; i++)
    if (i < code->ranges && code->low[i] <= pc && pc < code->high[i]) return true;
  return false;
}

/* One more range of the runtime's code; past RUNTIME_CODE_RANGES, none. */
static __always_inline void runtime_code_add(struct runtime_code* code, __u64 low, __u64 high) {
  const __u32 i = code->ranges;
  if (i >= RUNTIME_CODE_RANGES || low >= high) return;
  code->low[i] = low;
  code->high[i] = high;
  code->ranges = i + 1;
}

/* At the start of a walk of thread `tid` of process `tgid` (the current thread) in
 * unwind_walks' `slot`: the code of the process that a runtime's step knows, into `code`
 * (left empty for none); that runtime readies its own state for the walk. A global
 * function: verified once, on its own. */
int runtime_code_start(struct runtime_code* code, __u32 tgid, __u32 tid, __u32 slot);

/* One step through the frame at w->pc, which lies in the code of `runtime`
 * (runtime_code_start); `slot` as there. 1 ends the walk, as walk_stops. A global function. */
int runtime_code_step(struct unwind_walk* w, __u32 runtime, __u32 slot, __u32 depth);

#endif
