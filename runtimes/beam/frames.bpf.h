/* What the BEAM's samples carry besides their walked frames: for a scheduler thread of an
 * emulator userspace registered (runtimes/beam/processes.h), before each of its stacks, the
 * Erlang process it runs (pid, registered name, `current`: a NIF's own function, which has no
 * frame of its own), and for a dirty scheduler, which runs native code only, the CPs of its
 * process's saved stack (stop up), innermost first. Its maps are in runtimes/beam/maps.bpf.h,
 * its event in runtimes/beam/events.h. */
#ifndef BPFPROF_BEAM_FRAMES_H
#define BPFPROF_BEAM_FRAMES_H

#include "vmlinux.h"

#include <bpf/bpf_helpers.h>

#include "bpf/events.h"
#include "bpf/helpers.h"
#include "bpf/maps.h"
#include "runtimes/beam/events.h"
#include "runtimes/beam/maps.bpf.h"
#include "runtimes/beam/walk.bpf.h"

struct beam_scratch {
  struct bpfprof_beam_stack_event event;
  __u64 words[BPFPROF_BEAM_SAVED_WORDS];
};
struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct beam_scratch);
} beam_scratch_space SEC(".maps");

struct beam_saved_scan {
  const struct bpfprof_beam_process* process;
  struct beam_scratch* scratch;
  __u32 words;
};

static long beam_saved_word(__u64 index, void* context) {
  struct beam_saved_scan* s = context;
  struct bpfprof_beam_stack_event* e = &s->scratch->event;
  if (index >= s->words || e->count >= BPFPROF_MAX_BEAM_SAVED_FRAMES) return 1;
  const __u64 word = s->scratch->words[index & (BPFPROF_BEAM_SAVED_WORDS - 1)];
  if (!(word & 3) && in_beam_jit(s->process, word))
    e->frames[e->count++ & (BPFPROF_MAX_BEAM_SAVED_FRAMES - 1)] = word;
  return 0;
}

/* A dirty scheduler's process: the CPs of its stack, which its normal scheduler left at stop
 * and which cannot change while the dirty scheduler runs it. */
static __always_inline void beam_saved_frames(const struct bpfprof_beam_process* p,
                                              struct beam_scratch* scratch, __u64 c_p) {
  struct bpfprof_beam_stack_event* e = &scratch->event;
  const __u64 stop = read_user_word(c_p + p->process_stop);
  const __u64 hend = read_user_word(c_p + p->process_hend);
  if (!stop || stop >= hend || (stop & 7)) return;
  __u64 bytes = hend - stop;
  e->status = BPFPROF_BEAM_STACK_DIRTY;
  if (bytes > sizeof(scratch->words)) {
    bytes = sizeof(scratch->words);
    e->status = BPFPROF_BEAM_STACK_DIRTY_CUT;
  }
  if (bpf_probe_read_user(scratch->words, bytes, (void*)stop)) return;
  struct beam_saved_scan s = {.process = p, .scratch = scratch, .words = bytes / 8};
  bpf_loop(BPFPROF_BEAM_SAVED_WORDS, beam_saved_word, &s, 0);
}

/* Sends the running Erlang process of the current thread with the header of the stack event
 * that follows; nothing for a thread that runs none. */
static __always_inline void send_beam_stack(const struct bpfprof_event_header* sample, __u32 slot,
                                            bool walked) {
  (void)slot;
  (void)walked;
  __u32 tgid = sample->pid;
  if (!runtime_processes[BPFPROF_RUNTIME_BEAM]) return;
  const struct bpfprof_beam_process* p = bpf_map_lookup_elem(&beam_processes, &tgid);
  if (!p) return;
  const __u64 found = beam_scheduler_of(p, sample->tid);
  const __u64 esdp = found & ~BEAM_SCHEDULER_KIND_MASK;
  const __u32 kind = found & BEAM_SCHEDULER_KIND_MASK;
  if (kind == BPFPROF_BEAM_NOT_SCHEDULER) return;
  const __u64 c_p = read_user_word(esdp + p->esdp_current_process);
  if (!c_p) return;
  __u32 zero = 0;
  struct beam_scratch* scratch = bpf_map_lookup_elem(&beam_scratch_space, &zero);
  if (!scratch) return;
  struct bpfprof_beam_stack_event* e = &scratch->event;
  e->header = *sample;
  e->header.kind = BPFPROF_EVENT_BEAM_STACK;
  e->process_id = read_user_word(c_p + p->process_id);
  const __u64 reg = read_user_word(c_p + p->process_reg);
  e->registered = reg ? read_user_word(reg + p->regproc_name) : 0;
  e->current[0] = e->current[1] = e->current[2] = 0;
  const __u64 current = read_user_word(c_p + p->process_current);
  if (current) bpf_probe_read_user(e->current, sizeof(e->current), (void*)current);
  e->code_index = 0;
  bpf_probe_read_user(&e->code_index, sizeof(e->code_index), (void*)p->active_code_index);
  e->code_modules =
      read_user_word(p->ranges + (__u64)(e->code_index % 3) * p->ranges_size + p->ranges_modules);
  e->reserved = 0;
  e->status = BPFPROF_BEAM_STACK_RUNNING;
  e->count = 0;
  if (kind == BPFPROF_BEAM_DIRTY) beam_saved_frames(p, scratch, c_p);
  send_event(e,
             offsetof(struct bpfprof_beam_stack_event, frames) +
                 (__u64)(e->count & (BPFPROF_MAX_BEAM_SAVED_FRAMES * 2 - 1)) * sizeof(__u64),
             sizeof(*e), tgid);
}

#endif
