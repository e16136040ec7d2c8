/* What the BEAM's BPF side (runtimes/beam/walk.bpf.h, frames.bpf.h) and userspace share: the
 * entry of one emulator (beam.smp) in its map, and the event sent before each of its
 * scheduler threads' stacks, as BPFPROF_EVENT_BEAM_STACK. Plain C, fixed-size fields only.
 * The walk through the JIT's code records Erlang frames as the return addresses (CPs) it finds
 * on the process's stack, which userspace names from the emulator's code index; the event says
 * which Erlang process ran, and for a dirty scheduler (which runs no JIT code) brings the CPs
 * of its process's saved stack. docs/research/beam-jit.md has the facts. */
#ifndef BPFPROF_BEAM_EVENTS_H
#define BPFPROF_BEAM_EVENTS_H

#include "bpf/events.h"

/* The JIT's code blocks of one emulator (asmjit's allocator doubles a block up to 32 MiB). */
#define BPFPROF_BEAM_JIT_BLOCKS 8
/* A dirty scheduler's process: CPs taken from the first words of its saved stack. */
#define BPFPROF_MAX_BEAM_SAVED_FRAMES 128
#define BPFPROF_BEAM_SAVED_WORDS 512

enum bpfprof_beam_scheduler {
  BPFPROF_BEAM_NOT_SCHEDULER = 0,
  BPFPROF_BEAM_NORMAL = 1, /* runs JIT code: its Erlang frames are walked */
  BPFPROF_BEAM_DIRTY = 2,  /* dirty CPU or IO: native code only, its process's stack sent */
};

/* The three arrays of ErtsAlignedSchedulerData: normal, dirty CPU, dirty IO. */
#define BPFPROF_BEAM_SCHEDULER_ARRAYS 3

struct bpfprof_beam_process {
  __u64 jit_low[BPFPROF_BEAM_JIT_BLOCKS]; /* [low, high): the JIT's executable blocks */
  __u64 jit_high[BPFPROF_BEAM_JIT_BLOCKS];
  __u32 jit_blocks;
  __u32 frame_layout;     /* erts_frame_layout: 0 return addresses alone, 1 with frame pointers */
  __u64 process_main_low; /* [low, high): the JIT's process_main (the scheduler loop) */
  __u64 process_main_high;
  __u64 normal_exit; /* beam_normal_exit: the CP at the bottom of every process stack */
  __u64 root_return; /* the return address of sched_thread_func's call of process_main */
  /* Addresses of the pointers to the scheduler data arrays and of their counts (Uint). */
  __u64 scheduler_arrays[BPFPROF_BEAM_SCHEDULER_ARRAYS];
  __u64 scheduler_counts[BPFPROF_BEAM_SCHEDULER_ARRAYS];
  __u32 scheduler_stride; /* sizeof(ErtsAlignedSchedulerData) */
  /* ErtsSchedulerData: registers (ErtsSchedulerRegisters*, the C stack pointer of JIT code),
   * tid (pthread_t: the thread's FS base), current_process. */
  __u32 esdp_registers;
  __u32 esdp_tid;
  __u32 esdp_current_process;
  /* Where the return address into sched_thread_func lies: [registers + low, + low + 8 words). */
  __u32 root_slot_low;
  /* Process: common.id, common.u.alive.reg (RegProc*, its name at regproc_name), stop, heap,
   * hend, current (ErtsCodeMFA*). */
  __u32 process_id;
  __u32 process_reg;
  __u32 process_stop;
  __u32 process_heap;
  __u32 process_hend;
  __u32 process_current;
  __u32 regproc_name;
  /* The code map: the_active_code_index (u32), and the range tables (one of ranges_size bytes
   * per code index, its array of modules at ranges_modules): a new array is a new map. */
  __u64 active_code_index;
  __u64 ranges;
  __u32 ranges_size;
  __u32 ranges_modules;
};

enum bpfprof_beam_stack_status {
  BPFPROF_BEAM_STACK_NONE = 0,      /* no Erlang process on the thread */
  BPFPROF_BEAM_STACK_RUNNING = 1,   /* a normal scheduler running `process_id` */
  BPFPROF_BEAM_STACK_DIRTY = 2,     /* a dirty scheduler: `frames` from its process's stack */
  BPFPROF_BEAM_STACK_DIRTY_CUT = 3, /* the same, its stack deeper than what was read */
};

/* Only the used part of `frames` is sent. */
struct bpfprof_beam_stack_event {
  struct bpfprof_event_header header;
  __u64 process_id; /* the pid term, 0 for none */
  __u64 registered; /* the registered name's atom term, 0 for none */
  __u64 current[3]; /* Process.current's MFA (module, function atoms, arity), 0s unread */
  /* The code map the sample was taken under: the active code index, its range table's array. */
  __u64 code_modules;
  __u32 code_index;
  __u32 reserved;
  __u32 status; /* enum bpfprof_beam_stack_status */
  __u32 count;  /* frames */
  /* A dirty scheduler's process's CPs, innermost first. */
  __u64 frames[BPFPROF_MAX_BEAM_SAVED_FRAMES];
};

#endif
