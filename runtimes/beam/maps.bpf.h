/* The BEAM's maps: the emulators' entries (userspace writes them), each thread's scheduler
 * data, the state of the walks through JIT code (runtimes/beam/walk.bpf.h), whose process
 * runtimes/beam/frames.bpf.h sends, and how a thread's scheduler data is found. */
#ifndef BPFPROF_BEAM_MAPS_H
#define BPFPROF_BEAM_MAPS_H

#include "vmlinux.h"

#include <bpf/bpf_helpers.h>

#include "bpf/helpers.h"
#include "runtimes/beam/events.h"

/* tgid -> the emulator's JIT blocks, roots and layout (once its JIT has started). */
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 1024);
  __type(key, __u32);
  __type(value, struct bpfprof_beam_process);
} beam_processes SEC(".maps");

/* A thread's scheduler data (ErtsSchedulerData*), found by its FS base in the scheduler
 * arrays; a thread that is none is looked for again after BEAM_THREAD_RECHECK_NS (a
 * scheduler's own start sets its data's tid). */
struct beam_thread {
  __u64 esdp;
  __u64 checked_ns;
  __u32 kind; /* enum bpfprof_beam_scheduler */
  __u32 pad;
};
#define BEAM_THREAD_RECHECK_NS 200000000ull
struct {
  __uint(type, BPF_MAP_TYPE_LRU_HASH);
  __uint(max_entries, 16384);
  __type(key, __u32); /* tid */
  __type(value, struct beam_thread);
} beam_threads SEC(".maps");

/* A walk's view of its scheduler, per CPU and slot (as unwind_walks). */
struct beam_walk {
  struct bpfprof_beam_process process;
  __u64 registers;       /* R: the C stack pointer of its JIT code; 0 when no Erlang code runs */
  __u64 process_address; /* the running Process, 0 for none */
  __u64 heap;            /* [heap, hend): the process's heap block, its stack at the top */
  __u64 hend;
  __u64 stop;
  __u32 tid;
  __u32 words_scanned; /* stack words looked at for CPs in this walk */
};
struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 2);
  __type(key, __u32);
  __type(value, struct beam_walk);
} beam_walks SEC(".maps");

/* At most this many schedulers of each kind are looked at. */
#define BEAM_MAX_SCHEDULERS 64

struct beam_thread_search {
  const struct bpfprof_beam_process* process;
  __u64 fsbase;
  __u64 found;
  __u32 kind;
};

static long check_beam_scheduler(__u64 index, void* context) {
  struct beam_thread_search* s = context;
  const struct bpfprof_beam_process* p = s->process;
  const __u32 array = index / BEAM_MAX_SCHEDULERS, i = index % BEAM_MAX_SCHEDULERS;
  if (array >= BPFPROF_BEAM_SCHEDULER_ARRAYS) return 1;
  if (i >= read_user_word(p->scheduler_counts[array])) return 0;
  const __u64 base = read_user_word(p->scheduler_arrays[array]);
  if (!base) return 0;
  const __u64 esdp = base + (__u64)i * p->scheduler_stride;
  if (read_user_word(esdp + p->esdp_tid) != s->fsbase) return 0;
  s->found = esdp;
  s->kind = array == 0 ? BPFPROF_BEAM_NORMAL : BPFPROF_BEAM_DIRTY;
  return 1;
}

/* The kind (enum bpfprof_beam_scheduler) is in a scheduler data's address's low bits, which
 * are 0: the arrays' elements are cache-line aligned. */
#define BEAM_SCHEDULER_KIND_MASK 3ull

/* The current thread's scheduler data in `p`'s emulator, its kind in the low bits; 0 for a
 * thread that is no scheduler. A cached answer is checked by its tid. A global function: the
 * verifier checks it once, not at each caller. */
__noinline __u64 beam_scheduler_of(const struct bpfprof_beam_process* p, __u32 tid) {
  if (!p) return 0;
  const __u64 fsbase = current_thread_pointer();
  if (!fsbase) return 0;
  const __u64 now = bpf_ktime_get_ns();
  struct beam_thread* known = bpf_map_lookup_elem(&beam_threads, &tid);
  if (known && known->esdp && read_user_word(known->esdp + p->esdp_tid) == fsbase)
    return known->esdp | (known->kind & BEAM_SCHEDULER_KIND_MASK);
  if (known && !known->esdp && now - known->checked_ns < BEAM_THREAD_RECHECK_NS) return 0;
  struct beam_thread_search s = {.process = p, .fsbase = fsbase};
  bpf_loop(BPFPROF_BEAM_SCHEDULER_ARRAYS * BEAM_MAX_SCHEDULERS, check_beam_scheduler, &s, 0);
  if (s.found & BEAM_SCHEDULER_KIND_MASK) s.found = 0; /* not an element of the arrays */
  struct beam_thread found = {.esdp = s.found, .checked_ns = now, .kind = s.found ? s.kind : 0};
  bpf_map_update_elem(&beam_threads, &tid, &found, BPF_ANY);
  return found.esdp | found.kind;
}

#endif
