// SPDX-License-Identifier: GPL-2.0
/* The kernel side of bpfprof: a timer-sample program and the lifecycle tracepoints that keep
 * the set of tracked processes in the kernel, so that a child of a tracked process is
 * sampled from its first instruction. */
#include "vmlinux.h"

#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "events.h"
#include "stack_capture_fp.h"
#include "user_regs.h"

char LICENSE[] SEC("license") = "GPL";

/* Set before load: 1 samples every process (system-wide mode). */
const volatile __u32 track_all = 0;
/* Set before load: 1 records the stacks of threads leaving the CPU and when they return. */
const volatile __u32 record_off_cpu = 0;
/* Set before load: 1 records who wakes tracked threads, and from where (sched_waking). */
const volatile __u32 record_wakers = 0;
/* Set before load: the sampling interval; a thread's off-CPU stack is taken at most once
 * per interval (and a waker's stack once per (waker, wakee) pair). */
const volatile __u64 off_cpu_stack_interval_ns = 1000000;

/* Set before load: 0 for frame-pointer user stacks; else the most user-stack bytes to copy
 * per sample for unwinding in userspace (DWARF CFI). */
const volatile __u32 user_stack_copy_bytes = 0;
/* Set before load (with user_stack_copy_bytes): 1 walks user stacks in the kernel with the
 * unwind tables first, and copies the stack only when the walk cannot reach a root. */
const volatile __u32 kernel_unwind = 0;
/* Set before load, with kernel_unwind unless a copy size was given: copies take the whole
 * stack where its end is known (see copy_user_stack). */
const volatile __u32 fallback_copies_whole_stack = 0;

/* Larger stack copies for the processes that need them: userspace raises a process's size
 * when its stacks are cut at the copy's end (a frame of tens of KB, deep stacks). */
struct {
  __uint(type, BPF_MAP_TYPE_LRU_HASH);
  __uint(max_entries, 16384);
  __type(key, __u32);   /* tgid */
  __type(value, __u32); /* bytes */
} stack_copy_bytes_by_process SEC(".maps");

/* Scratch space for DWARF samples, one entry per CPU (keyed by CPU number; sized to the
 * possible CPUs before load): a per-CPU array's values are limited to 32 KiB, too small for
 * a 64 KiB stack copy. */
struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct bpfprof_dwarf_sample_event);
} dwarf_scratch SEC(".maps");

/* A thread leaving the CPU: when, where its user registers were, and whether its kernel stack
 * is worth taking (kernel_stack_worth_taking). */
struct off_cpu_stop {
  __u64 time_ns;
  __u64 user_pc;
  __u64 user_sp;
  __u32 with_kernel_stack;
  /* --no-off-cpu: preempted after a sample, so its next stop is marked too (on_switch) */
  __u32 owes_stop_mark;
};

/* The stop of the thread leaving the CPU now, per CPU: in a map value, whose contents the
 * verifier does not track, rather than on the BPF stack, where each of its fields' values
 * would double the paths verified after it (on_switch took 176 ms to load instead of 85). */
struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct off_cpu_stop);
} current_stop SEC(".maps");

/* Each thread's last stop whose off-CPU stacks were taken. */
struct {
  __uint(type, BPF_MAP_TYPE_TASK_STORAGE);
  __uint(map_flags, BPF_F_NO_PREALLOC);
  __type(key, int);
  __type(value, struct off_cpu_stop);
} off_cpu_stack_taken SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 65536); /* set before load: record --max-processes */
  __type(key, __u32);         /* tgid */
  __type(value, __u8);
} tracked_processes SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_RINGBUF);
  __uint(max_entries, 16 * 1024 * 1024);
} events SEC(".maps");

/* Forks, execs, exits and renames have a ring buffer of their own: when samples flood the
 * main one, the processes and threads they belong to must still be known. */
struct {
  __uint(type, BPF_MAP_TYPE_RINGBUF);
  __uint(max_entries, 1024 * 1024);
} lifecycle_events SEC(".maps");

/* Sample events exceed the 512-byte BPF stack: build them in per-CPU scratch space. */
struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct bpfprof_sample_event);
} sample_scratch SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct bpfprof_switch_out_event);
} switch_scratch SEC(".maps");

/* The thread last sampled on each CPU during its current stretch there: without off-CPU
 * stacks, only such a thread needs a switch-out event (to end its last sampled stack). */
struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, __u32);
} sampled_tid SEC(".maps");

/* Events that did not fit in the ring buffer, per CPU: counted, never hidden. */
struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, __u64);
} lost_events SEC(".maps");

/* Their total, in .bss: userspace reads it through its mapping of the section at every poll,
 * without a system call; losses are rare, so the shared atomic costs nothing. */
__u64 lost_events_total = 0;

/* The same, per process (tgid), so the loss can be shown where it happened. */
struct {
  __uint(type, BPF_MAP_TYPE_LRU_HASH);
  __uint(max_entries, 16384);
  __type(key, __u32);
  __type(value, __u64);
} lost_events_by_process SEC(".maps");

/* Children that could not be followed: tracked_processes was full (record --max-processes). */
struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, __u64);
} processes_not_followed SEC(".maps");

static __always_inline void count_lost_for(__u32 tgid) {
  __u32 zero = 0;
  __u64* lost = bpf_map_lookup_elem(&lost_events, &zero);
  if (lost) __sync_fetch_and_add(lost, 1);
  __sync_fetch_and_add(&lost_events_total, 1);
  __u64* of_process = bpf_map_lookup_elem(&lost_events_by_process, &tgid);
  if (!of_process) {
    /* Another CPU may create it first: then its entry is the one to add to. */
    __u64 zero_count = 0;
    bpf_map_update_elem(&lost_events_by_process, &tgid, &zero_count, BPF_NOEXIST);
    of_process = bpf_map_lookup_elem(&lost_events_by_process, &tgid);
  }
  if (of_process) __sync_fetch_and_add(of_process, 1);
}

/* For the task running now. */
static __always_inline void count_lost(void) { count_lost_for(bpf_get_current_pid_tgid() >> 32); }

/* Waking the reader for every event would interrupt the profiled threads with IPIs at the
 * sampling rate; userspace polls on a timer instead, and is woken only when the buffer
 * gets full enough to need it. */
/* Set before load: a quarter of the ring buffer's size. */
const volatile __u64 wakeup_threshold = 4 * 1024 * 1024;

static __always_inline __u64 submit_flags(void) {
  return bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) > wakeup_threshold ? BPF_RB_FORCE_WAKEUP
                                                                          : BPF_RB_NO_WAKEUP;
}

/* Set before load: bpfprof's own process, never sampled (system-wide, its own samples would
 * be events it has to read, unwind and write: a feedback loop at high rates). */
const volatile __u32 self_tgid = 0;

static __always_inline __u64 lifecycle_submit_flags(void) {
  return bpf_ringbuf_query(&lifecycle_events, BPF_RB_AVAIL_DATA) > 256 * 1024 ? BPF_RB_FORCE_WAKEUP
                                                                              : BPF_RB_NO_WAKEUP;
}

/* A new tracked process (fork or exec) wakes the reader, at most once per 5 ms: until it has
 * passed the process's mappings to the kernel walker, the process's samples fall back to
 * stack copies. Without the kernel walker nothing waits for the mappings. */
__u64 last_new_process_wakeup_ns = 0;
#define NEW_PROCESS_WAKEUP_INTERVAL_NS 5000000

static __always_inline __u64 new_process_submit_flags(void) {
  const __u64 now = bpf_ktime_get_ns();
  if (!kernel_unwind || now - last_new_process_wakeup_ns < NEW_PROCESS_WAKEUP_INTERVAL_NS)
    return lifecycle_submit_flags();
  last_new_process_wakeup_ns = now; /* a race between CPUs costs one wakeup more */
  return BPF_RB_FORCE_WAKEUP;
}

/* 0 when not tracked, else BPFPROF_TRACKED or BPFPROF_TRACKED_AWAITING_EXEC. */
static __always_inline __u8 tracked_state(__u32 tgid) {
  if (tgid == 0 || tgid == self_tgid) /* the per-CPU idle tasks; the profiler itself */
    return 0;
  if (track_all) return BPFPROF_TRACKED;
  const __u8* state = bpf_map_lookup_elem(&tracked_processes, &tgid);
  return state ? *state : 0;
}

static __always_inline bool is_tracked(__u32 tgid) { return tracked_state(tgid) != 0; }

static __always_inline void fill_header(struct bpfprof_event_header* h, __u32 kind, __u32 pid,
                                        __u32 tid) {
  h->kind = kind;
  h->cpu = bpf_get_smp_processor_id();
  h->timestamp_ns = bpf_ktime_get_ns();
  h->pid = pid;
  h->tid = tid;
}

#include "runtimes/python/frames.bpf.h"

struct stack_end {
  __u64 end;
};

static long find_stack_end(struct task_struct* task, struct vm_area_struct* vma, void* data) {
  ((struct stack_end*)data)->end = vma->vm_end;
  return 0;
}

/* The same for off-CPU stacks (sched_switch runs with interrupts off, but keep the two apart
 * all the same). */
struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct bpfprof_dwarf_sample_event);
} dwarf_switch_scratch SEC(".maps");

/* The current task's saved user registers (also when it is in the kernel), in DWARF order;
 * `r` stays as it is (zeroed by the caller) for a task without a user context. */
static __always_inline void read_user_registers(struct task_struct* task, __u64* r) {
  if (!task->mm) return;
  struct pt_regs* regs = (struct pt_regs*)bpf_task_pt_regs(task);
  if (!regs) return;
  /* Direct loads (a BTF pointer): a helper call per register costs ~20 ns more. */
  r[0] = regs->ax;
  r[1] = regs->dx;
  r[2] = regs->cx;
  r[3] = regs->bx;
  r[4] = regs->si;
  r[5] = regs->di;
  r[6] = regs->bp;
  r[7] = regs->sp;
  r[8] = regs->r8;
  r[9] = regs->r9;
  r[10] = regs->r10;
  r[11] = regs->r11;
  r[12] = regs->r12;
  r[13] = regs->r13;
  r[14] = regs->r14;
  r[15] = regs->r15;
  r[16] = user_pc(regs);
}

#define PAGE_BYTES 4096

/* What a page's copy reads lives in the event (a map value, whose contents the verifier
 * does not track), not on the stack: so bpf_loop's callback is verified in a few passes. */
struct stack_copy {
  struct bpfprof_dwarf_sample_event* event;
};

/* Page `index` of the copy: from sp to the first page boundary, then whole pages. */
static long copy_stack_page(__u64 index, void* context) {
  struct bpfprof_dwarf_sample_event* e = ((struct stack_copy*)context)->event;
  const __u64 sp = e->user_regs[BPFPROF_REG_SP];
  const __u64 wanted = e->stack_bytes_wanted;
  const __u64 first = PAGE_BYTES - (sp & (PAGE_BYTES - 1));
  __u64 offset = index == 0 ? 0 : first + (index - 1) * PAGE_BYTES;
  if (offset >= wanted) return 1;
  __u64 chunk = index == 0 ? first : PAGE_BYTES;
  if (chunk > wanted - offset) chunk = wanted - offset;
  if (offset > BPFPROF_MAX_STACK_COPY || chunk > PAGE_BYTES || chunk == 0) return 1;
  /* On failure the helper zeroes the destination. */
  if (bpf_probe_read_user(e->stack + offset, chunk, (void*)(sp + offset)) == 0)
    e->stack_size = offset + chunk;
  else
    e->flags |= BPFPROF_STACK_COPY_UNREADABLE;
  return 0;
}

/* Copies the user stack from sp, page by page, up to the end of its mapping, at most
 * user_stack_copy_bytes (or the process's raised size). A page that cannot be read without a
 * fault (never touched: the middle of a large local array, or past the end of the mapping
 * when its lock was busy and the end is unknown) is left zeroed and the copy goes on: the
 * frames above it are still there. The copy ends after the last page that was read. */
static __always_inline void copy_user_stack(struct task_struct* task,
                                            struct bpfprof_dwarf_sample_event* e) {
  const __u64 sp = e->user_regs[BPFPROF_REG_SP];
  __u64 limit = user_stack_copy_bytes;
  __u32 tgid = e->header.pid;
  __u32* raised = bpf_map_lookup_elem(&stack_copy_bytes_by_process, &tgid);
  if (raised) limit = *raised;
  bool end_known = false;
  struct stack_end found = {0};
  if (bpf_find_vma(task, sp, find_stack_end, &found, 0) == 0 && found.end > sp) end_known = true;
  /* With the kernel walk, a copy is the rare fallback (a process's first milliseconds, code
   * without a table): it takes the whole stack, which is only as deep as it has been, so that
   * a young process's deep frames (python's 16 KB path buffers) are not cut at the limit. */
  /* Its end may be unknown because the walk used the one VMA lookup of the sampling
   * interrupt (unwind_user.h): then the pages past it fail to read and are not sent. */
  if (fallback_copies_whole_stack) limit = BPFPROF_MAX_STACK_COPY;
  if (limit > BPFPROF_MAX_STACK_COPY) limit = BPFPROF_MAX_STACK_COPY;
  e->stack_copy_limit = limit;
  e->stack_bytes_wanted = limit;
  if (end_known) {
    if (found.end - sp <= limit)
      e->stack_bytes_wanted = found.end - sp;
    else
      e->flags |= BPFPROF_STACK_COPY_AT_LIMIT;
  }
  e->stack_size = 0;
  struct stack_copy c = {.event = e};
  bpf_loop(BPFPROF_MAX_STACK_COPY / PAGE_BYTES + 2, copy_stack_page, &c, 0);
  if (!end_known && e->stack_size >= limit) e->flags |= BPFPROF_STACK_COPY_AT_LIMIT;
}

/* The current task's user registers and stack copy, for unwinding with CFI in userspace; and
 * its kernel stack. */
static __always_inline void capture_dwarf_stacks(void* ctx, struct bpfprof_dwarf_sample_event* e,
                                                 bool with_user, bool with_kernel) {
  struct task_struct* task = bpf_get_current_task_btf();
  e->stack_size = 0;
  e->stack_copy_limit = 0;
  e->stack_bytes_wanted = 0;
  for (int i = 0; i < BPFPROF_USER_REGS; i++) e->user_regs[i] = 0;
  if (with_user) read_user_registers(task, e->user_regs);
  e->kernel_depth =
      with_kernel ? capture_kernel_stack(ctx, e->kernel_ips, BPFPROF_MAX_STACK_DEPTH) & 0x7f : 0;
  if (e->user_regs[BPFPROF_REG_SP]) copy_user_stack(task, e);
}

static __always_inline void send_dwarf_event(struct bpfprof_dwarf_sample_event* e) {
  __u64 out = offsetof(struct bpfprof_dwarf_sample_event, stack) + e->stack_size;
  if (out > offsetof(struct bpfprof_dwarf_sample_event, stack) + BPFPROF_MAX_STACK_COPY)
    out = offsetof(struct bpfprof_dwarf_sample_event, stack) + BPFPROF_MAX_STACK_COPY;
  if (bpf_ringbuf_output(&events, e, out, submit_flags())) count_lost_for(e->header.pid);
}

#include "unwind_user.h"

/* Sends an unwound event: the user frames the walk left in e->ips, then the kernel stack
 * when taken now; before it the Python stack, when its frames are taken now too. */
static __always_inline void send_unwound_event(void* ctx, struct bpfprof_unwound_event* e,
                                               bool with_kernel_stack, bool with_python_stack) {
  const __u32 user_depth = e->user_depth & BPFPROF_UNWOUND_INDEX_MASK;
  __u32 kernel_depth = 0;
  if (with_kernel_stack)
    kernel_depth = capture_kernel_stack(ctx, &e->ips[user_depth], BPFPROF_MAX_STACK_DEPTH) & 0x7f;
  e->kernel_depth = kernel_depth;
  __u64 size = offsetof(struct bpfprof_unwound_event, ips) +
               (__u64)(user_depth + kernel_depth) * sizeof(__u64);
  if (size > sizeof(*e)) size = sizeof(*e);
  if (with_python_stack) send_python_stack(&e->header);
  if (bpf_ringbuf_output(&events, e, size, submit_flags())) count_lost_for(e->header.pid);
}

/* Whether the task is inside execve after its old image is gone: in_execve is set for the
 * whole call, and once the new mm is in, the saved user sp lies in none of its mappings (it
 * pointed into the old stack). Before that point the old stack is still there to walk. */
static __noinline bool in_exec_without_user_stack(struct task_struct* task) {
  if (!bpf_core_field_exists(task->in_execve) || !BPF_CORE_READ_BITFIELD(task, in_execve))
    return false;
  struct pt_regs* regs = (struct pt_regs*)bpf_task_pt_regs(task);
  if (!regs || !task->mm) return false;
  struct stack_end found = {0};
  return bpf_find_vma(task, regs->sp, find_stack_end, &found, 0) != 0;
}

/* A sample or switch-out (`kind`, in unwound_scratch's `slot`) of a task
 * in_exec_without_user_stack: the exec pseudo-frame, then the kernel stack, in every
 * --call-graph mode. */
static __noinline void send_exec_event(void* ctx, struct task_struct* task, __u32 kind, __u32 slot,
                                       __u32 state) {
  struct bpfprof_unwound_event* e = bpf_map_lookup_elem(&unwound_scratch, &slot);
  if (!e) return;
  fill_header(&e->header, kind, task->tgid, task->pid);
  e->cpu_time_ns = task->se.sum_exec_runtime;
  e->state = state;
  e->flags = 0;
  e->ips[0] = BPFPROF_RAW_EXEC_FRAME;
  e->user_depth = 1;
  send_unwound_event(ctx, e, true, false); /* the interpreter's frames are gone with the image */
}

/* Whether the timer interrupted user code: the kernel stack is then empty, and the helper
 * that would find that out need not run. */
static __always_inline bool interrupted_user_mode(struct bpf_perf_event_data* ctx) {
  /* A whole-word load: the verifier refuses the narrower one `& 3` would compile to. */
  const __u64 cs = *(volatile __u64*)&ctx->regs.cs;
  return (cs & 3) == 3;
}

/* The in-kernel walk for a timer sample; false when it must fall back to a stack copy. */
static __always_inline bool send_unwound_sample(struct bpf_perf_event_data* ctx, __u32 tgid,
                                                __u32 tid) {
  __u32 slot = 0;
  struct bpfprof_unwound_event* e = bpf_map_lookup_elem(&unwound_scratch, &slot);
  if (!e) return false;
  struct task_struct* task = bpf_get_current_task_btf();
  if (!unwind_current_user_stack(tgid, slot)) return false;
  fill_header(&e->header, BPFPROF_EVENT_UNWOUND_SAMPLE, tgid, tid);
  e->cpu_time_ns = task->se.sum_exec_runtime;
  e->state = 0;
  e->flags = 0;
  send_unwound_event(ctx, e, !interrupted_user_mode(ctx), true);
  return true;
}

static __always_inline int send_dwarf_sample(struct bpf_perf_event_data* ctx, __u32 tgid,
                                             __u32 tid) {
  __u32 cpu = bpf_get_smp_processor_id();
  struct bpfprof_dwarf_sample_event* e = bpf_map_lookup_elem(&dwarf_scratch, &cpu);
  if (!e) return 0;
  fill_header(&e->header, BPFPROF_EVENT_DWARF_SAMPLE, tgid, tid);
  struct task_struct* task = bpf_get_current_task_btf();
  e->cpu_time_ns = task->se.sum_exec_runtime;
  e->state = 0;
  e->flags = 0;
  capture_dwarf_stacks(ctx, e, true, true);
  send_python_stack(&e->header);
  send_dwarf_event(e);
  return 0;
}

SEC("perf_event")
int on_sample(struct bpf_perf_event_data* ctx) {
  __u64 pid_tgid = bpf_get_current_pid_tgid();
  __u32 tgid = pid_tgid >> 32;
  const __u8 tracked = tracked_state(tgid);
  if (!tracked) return 0;

  __u32 zero = 0;
  __u32* last_sampled = bpf_map_lookup_elem(&sampled_tid, &zero);
  if (last_sampled) *last_sampled = (__u32)pid_tgid;
  struct task_struct* current = bpf_get_current_task_btf();
  if (tracked == BPFPROF_TRACKED_AWAITING_EXEC || in_exec_without_user_stack(current)) {
    send_exec_event(ctx, current, BPFPROF_EVENT_UNWOUND_SAMPLE, 0, 0);
    return 0;
  }
  if (kernel_unwind && send_unwound_sample(ctx, tgid, (__u32)pid_tgid)) return 0;
  if (user_stack_copy_bytes) return send_dwarf_sample(ctx, tgid, (__u32)pid_tgid);
  struct bpfprof_sample_event* e = bpf_map_lookup_elem(&sample_scratch, &zero);
  if (!e) return 0;
  fill_header(&e->header, BPFPROF_EVENT_SAMPLE, tgid, (__u32)pid_tgid);
  struct task_struct* task = bpf_get_current_task_btf();
  e->cpu_time_ns = task->se.sum_exec_runtime;

  __u32 user_depth = capture_user_stack(ctx, e->ips, BPFPROF_MAX_STACK_DEPTH);
  /* bpf_get_stack never returns more than 127 frames; the mask lets the verifier see the
   * bound of the offset at which the kernel frames go (127 == 0x7f). */
  user_depth &= 0x7f;
  __u32 kernel_depth = interrupted_user_mode(ctx) ? 0
                                                  : capture_kernel_stack(ctx, &e->ips[user_depth],
                                                                         BPFPROF_MAX_STACK_DEPTH);
  kernel_depth &= 0x7f;
  e->user_depth = user_depth;
  e->kernel_depth = kernel_depth;

  __u64 size = offsetof(struct bpfprof_sample_event, ips) +
               (__u64)(user_depth + kernel_depth) * sizeof(__u64);
  if (size > sizeof(*e)) size = sizeof(*e);
  send_python_stack(&e->header);
  if (bpf_ringbuf_output(&events, e, size, submit_flags())) count_lost_for(e->header.pid);
  return 0;
}

#define TASK_RUNNING_STATE 0x0000
#define TASK_UNINTERRUPTIBLE_STATE 0x0002
#define TASK_DEAD_STATE 0x0080
/* With UNINTERRUPTIBLE: TASK_IDLE, a kernel thread's idle wait. */
#define TASK_NOLOAD_STATE 0x0400

static __always_inline __u32 off_cpu_state(bool preempt, unsigned int prev_state) {
  if (preempt || prev_state == TASK_RUNNING_STATE) return BPFPROF_OFF_CPU_WAITING_CPU;
  if ((prev_state & TASK_UNINTERRUPTIBLE_STATE) && !(prev_state & TASK_NOLOAD_STATE))
    return BPFPROF_OFF_CPU_IO_WAIT;
  return BPFPROF_OFF_CPU_SLEEPING;
}

#define PF_KTHREAD_FLAG 0x00200000

/* Whether a thread leaving the CPU is worth its kernel stack. Not so for one preempted on its
 * way back to user mode from an interrupt (the timer's, a wakeup's): that stack is always the
 * exit path (..._interrupt < irqentry_exit_to_user_mode < schedule) and says nothing the
 * "waiting for CPU" frame does not, yet taking it at a context switch costs ~6 us for its 7
 * frames, more than the user walk (on_switch ran 7.8-9.1 us on average with it, 2.7-3.1
 * without: bench/bpf_runtime.sh). Such a thread is runnable without being
 * preempted in the kernel (that is preempt_schedule), and its saved registers are an
 * interrupt's (orig_ax < 0: a vector, or -1 for an exception without an error code) from user
 * mode. A system call's exit keeps its stack: sched_yield's is worth seeing. */
static __always_inline bool kernel_stack_worth_taking(const struct pt_regs* user_regs, bool preempt,
                                                      unsigned int prev_state) {
  if (preempt || prev_state != TASK_RUNNING_STATE || !user_regs) return true;
  return (long)user_regs->orig_ax >= 0 || (user_regs->cs & 3) != 3; /* BTF loads: no helper */
}

/* The stop of `task` leaving the CPU now (in current_stop), or NULL. */
static __always_inline struct off_cpu_stop* off_cpu_stop_of(struct task_struct* task, bool preempt,
                                                            unsigned int prev_state) {
  __u32 zero = 0;
  struct off_cpu_stop* stop = bpf_map_lookup_elem(&current_stop, &zero);
  if (!stop) return NULL;
  /* A kernel thread has no user registers. */
  struct pt_regs* regs =
      task->flags & PF_KTHREAD_FLAG ? NULL : (struct pt_regs*)bpf_task_pt_regs(task);
  stop->time_ns = bpf_ktime_get_ns();
  stop->with_kernel_stack = kernel_stack_worth_taking(regs, preempt, prev_state);
  stop->owes_stop_mark = 0;
  stop->user_pc = regs ? regs->ip : 0;
  stop->user_sp = regs ? regs->sp : 0;
  return stop;
}

/* Whether a thread stops where its stacks were taken at its last stop: less than an interval
 * ago, at the same user pc and sp, with a kernel stack taken likewise or not. Then they are
 * not taken again (a thread that blocks in one place 100,000 times a second needs a stack per
 * interval). Time alone is not enough: a thread preempted in its loop that goes to sleep in a
 * system call 0.2 ms later slept in the loop's stack (on a busy machine: 90% of a sleeper's
 * sleep). Else `taken` becomes this stop, whose stacks the caller takes. */
static __always_inline bool reuses_off_cpu_stacks(struct off_cpu_stop* taken,
                                                  const struct off_cpu_stop* stop) {
  if (!taken || !stop) return false;
  return taken->time_ns && stop->time_ns - taken->time_ns < off_cpu_stack_interval_ns &&
         taken->user_pc == stop->user_pc && taken->user_sp == stop->user_sp &&
         taken->with_kernel_stack == stop->with_kernel_stack;
}

static __always_inline struct off_cpu_stop* off_cpu_stacks_taken(struct task_struct* task) {
  return bpf_task_storage_get(&off_cpu_stack_taken, task, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
}

/* Whether the thread's last stacks serve this stop (reuses_off_cpu_stacks); if not, this stop
 * becomes the one whose stacks the caller takes now. */
static __always_inline bool reuse_or_claim_off_cpu_stacks(struct task_struct* task,
                                                          const struct off_cpu_stop* stop) {
  struct off_cpu_stop* taken = off_cpu_stacks_taken(task);
  if (reuses_off_cpu_stacks(taken, stop)) return true;
  if (taken && stop) *taken = *stop;
  return false;
}

/* --no-off-cpu marks a thread's stop (a weight-0 sample: its CPU time ends here) only when it
 * was sampled since its last switch-in: a thread that switches 100,000 times a second unsampled
 * costs nothing. A thread preempted after a sample that then sleeps before the next one owes
 * the sleep's mark too, else the sleep would show as waiting for the CPU. */
static __always_inline bool marks_stop_without_off_cpu(struct task_struct* prev, bool was_sampled,
                                                       __u32 state) {
  const bool preempted = state == BPFPROF_OFF_CPU_WAITING_CPU;
  struct off_cpu_stop* marks = bpf_task_storage_get(
      &off_cpu_stack_taken, prev, 0, was_sampled && preempted ? BPF_LOCAL_STORAGE_GET_F_CREATE : 0);
  if (was_sampled) {
    if (marks) marks->owes_stop_mark = preempted;
    return true;
  }
  if (!marks || !marks->owes_stop_mark || preempted) return false;
  marks->owes_stop_mark = 0;
  return true;
}

/* A thread's off-CPU stacks, when taken now, walked in the kernel; false when the walk must
 * fall back to a stack copy. A stack taken less than an interval ago is not taken again. */
static __always_inline bool send_unwound_switch_out(void* ctx, struct task_struct* prev,
                                                    const struct off_cpu_stop* stop, __u32 state) {
  __u32 slot = 1;
  struct bpfprof_unwound_event* e = bpf_map_lookup_elem(&unwound_scratch, &slot);
  if (!e) return false;
  struct off_cpu_stop* taken = off_cpu_stacks_taken(prev);
  const bool reuse = reuses_off_cpu_stacks(taken, stop);
  e->user_depth = 0;
  /* prev is still the current task here: these are the stacks it sleeps in. */
  if (!reuse && !unwind_current_user_stack(prev->tgid, slot)) return false;
  if (!reuse && taken) *taken = *stop;
  fill_header(&e->header, BPFPROF_EVENT_UNWOUND_SWITCH_OUT, prev->tgid, prev->pid);
  e->cpu_time_ns = prev->se.sum_exec_runtime;
  e->state = state;
  e->flags = reuse ? BPFPROF_SWITCH_STACK_REUSED : 0;
  send_unwound_event(ctx, e, !reuse && stop->with_kernel_stack, !reuse);
  return true;
}

SEC("tp_btf/sched_switch")
int BPF_PROG(on_switch, bool preempt, struct task_struct* prev, struct task_struct* next,
             unsigned int prev_state) {
  __u32 zero = 0;
  __u32 prev_tgid = prev->tgid;
  __u32 prev_tid = prev->pid;
  __u32* last_sampled = bpf_map_lookup_elem(&sampled_tid, &zero);
  bool was_sampled = last_sampled && *last_sampled == prev_tid;
  if (last_sampled) *last_sampled = 0;

  /* A dying thread's exit event ends it; anything else leaving the CPU is off-CPU time. */
  const __u8 tracked = prev_state & TASK_DEAD_STATE ? 0 : tracked_state(prev_tgid);
  const __u32 state = off_cpu_state(preempt, prev_state);
  bool leaving =
      tracked && (record_off_cpu || marks_stop_without_off_cpu(prev, was_sampled, state));
  if (leaving && record_off_cpu &&
      (tracked == BPFPROF_TRACKED_AWAITING_EXEC || in_exec_without_user_stack(prev))) {
    send_exec_event(ctx, prev, BPFPROF_EVENT_UNWOUND_SWITCH_OUT, 1, state);
    leaving = false;
  }
  struct off_cpu_stop* stop =
      leaving && record_off_cpu ? off_cpu_stop_of(prev, preempt, prev_state) : NULL;
  if (leaving && record_off_cpu && stop && kernel_unwind &&
      send_unwound_switch_out(ctx, prev, stop, state))
    leaving = false;
  if (leaving && record_off_cpu && user_stack_copy_bytes) {
    /* Off-CPU stacks unwound like timer samples: registers and stack bytes. */
    __u32 cpu = bpf_get_smp_processor_id();
    struct bpfprof_dwarf_sample_event* d = bpf_map_lookup_elem(&dwarf_switch_scratch, &cpu);
    if (d) {
      fill_header(&d->header, BPFPROF_EVENT_DWARF_SWITCH_OUT, prev_tgid, prev_tid);
      d->cpu_time_ns = prev->se.sum_exec_runtime;
      d->state = state;
      const bool reuse = reuse_or_claim_off_cpu_stacks(prev, stop);
      d->flags = reuse ? BPFPROF_SWITCH_STACK_REUSED : 0;
      capture_dwarf_stacks(ctx, d, !reuse, !reuse && (!stop || stop->with_kernel_stack));
      if (!reuse) send_python_stack(&d->header);
      send_dwarf_event(d);
    }
    leaving = false;
  }
  if (leaving) {
    struct bpfprof_switch_out_event* e = bpf_map_lookup_elem(&switch_scratch, &zero);
    if (e) {
      fill_header(&e->header, BPFPROF_EVENT_SWITCH_OUT, prev_tgid, prev_tid);
      e->cpu_time_ns = prev->se.sum_exec_runtime;
      e->state = state;
      e->flags = 0;
      __u32 user_depth = 0, kernel_depth = 0;
      if (record_off_cpu) {
        if (reuse_or_claim_off_cpu_stacks(prev, stop)) {
          e->flags = BPFPROF_SWITCH_STACK_REUSED;
        } else {
          /* prev is still the current task here: these are the stacks it sleeps in. */
          user_depth = capture_user_stack(ctx, e->ips, BPFPROF_MAX_STACK_DEPTH) & 0x7f;
          if (!stop || stop->with_kernel_stack)
            kernel_depth =
                capture_kernel_stack(ctx, &e->ips[user_depth], BPFPROF_MAX_STACK_DEPTH) & 0x7f;
          send_python_stack(&e->header);
        }
      }
      e->user_depth = user_depth;
      e->kernel_depth = kernel_depth;
      __u64 size = offsetof(struct bpfprof_switch_out_event, ips) +
                   (__u64)(user_depth + kernel_depth) * sizeof(__u64);
      if (size > sizeof(*e)) size = sizeof(*e);
      if (bpf_ringbuf_output(&events, e, size, submit_flags())) count_lost_for(e->header.pid);
    }
  }

  if (record_off_cpu && is_tracked(next->tgid)) {
    struct bpfprof_event_header* h = bpf_ringbuf_reserve(&events, sizeof(*h), 0);
    if (!h) {
      count_lost_for(next->tgid);
      return 0;
    }
    fill_header(h, BPFPROF_EVENT_SWITCH_IN, next->tgid, next->pid);
    bpf_ringbuf_submit(h, submit_flags());
  }
  return 0;
}

/* When the waker's stack of each (waker, wakee) pair was last taken: a producer waking its
 * consumer a hundred thousand times a second needs one stack per interval, not each time. */
struct waker_pair {
  __u32 waker_tid; /* 0 for an interrupt */
  __u32 context;   /* enum bpfprof_waker_context */
  __u32 wakee_tid;
  __u32 reserved;
};
struct {
  __uint(type, BPF_MAP_TYPE_LRU_HASH);
  __uint(max_entries, 65536);
  __type(key, struct waker_pair);
  __type(value, __u64);
} waker_stack_taken SEC(".maps");

/* The kernel stack size (x86-64 without KASAN): interrupt handlers, and the softirqs run on
 * their way out, run on the CPU's own interrupt stack, not within the current task's. */
#define TASK_STACK_BYTES 16384

/* Whether this runs on the current task's kernel stack: else in an interrupt (hardirq, or a
 * softirq after one), whatever task it interrupted. The preempt count would say it directly,
 * but it is a per-CPU variable that this kernel does not list in kallsyms (no
 * CONFIG_KALLSYMS_ALL), so BPF cannot find it. Where the stack is: the tracepoint's arguments,
 * which `ctx` points to, lie on the stack the tracepoint fired on (the program's own frame
 * may be a private per-CPU stack). Their address's low 32 bits come from a 32-bit
 * subtraction, which the verifier lets a privileged program make of a pointer. */
static __always_inline bool on_task_stack(void* ctx, struct task_struct* task) {
  __u64 args_low; /* the 32-bit operation zero-extends: only the low bits are left */
  asm volatile("r0 = %[ctx]; w0 -= 0; %[out] = r0" : [out] "=r"(args_low) : [ctx] "r"(ctx) : "r0");
  const __u32 stack_low = (__u32)(__u64)task->stack;
  return (__u32)args_low - stack_low < TASK_STACK_BYTES;
}

/* A waker's stack event: the waking's cpu and time, the waker's pid and tid. */
static __always_inline void waker_stack_header(struct bpfprof_event_header* h,
                                               const struct bpfprof_event_header* waking,
                                               __u32 kind, struct task_struct* task) {
  *h = *waking;
  h->kind = kind;
  h->pid = task->tgid;
  h->tid = task->pid;
}

/* The waker's stacks, after its waking event (same cpu and timestamp), unwound as a
 * sample's: walked in the kernel, else copied; by frame pointers with --call-graph fp.
 * `with_user`: a thread of a tracked process in process context; else the kernel stack only.
 * sched_waking runs with interrupts off (under the wakee's pi_lock), as sched_switch does, so
 * the two share sched_switch's scratch space without ever nesting. */
static __always_inline void send_waker_stack(void* ctx, const struct bpfprof_event_header* waking,
                                             bool with_user) {
  struct task_struct* task = bpf_get_current_task_btf();
  const __u32 tgid = task->tgid;
  __u32 slot = 1;
  struct bpfprof_unwound_event* e = bpf_map_lookup_elem(&unwound_scratch, &slot);
  if (!e) return;
  e->user_depth = 0;
  bool walked = !with_user;
  if (with_user && kernel_unwind) {
    walked = unwind_current_user_stack(tgid, slot);
  } else if (with_user && !user_stack_copy_bytes) {
    e->user_depth = capture_user_stack(ctx, e->ips, BPFPROF_MAX_STACK_DEPTH) & 0x7f;
    walked = true;
  }
  if (walked) {
    waker_stack_header(&e->header, waking, BPFPROF_EVENT_WAKER_STACK, task);
    e->cpu_time_ns = 0;
    e->state = 0;
    e->flags = 0;
    send_unwound_event(ctx, e, true, true);
    return;
  }
  __u32 cpu = bpf_get_smp_processor_id();
  struct bpfprof_dwarf_sample_event* d = bpf_map_lookup_elem(&dwarf_switch_scratch, &cpu);
  if (!d) return;
  waker_stack_header(&d->header, waking, BPFPROF_EVENT_DWARF_WAKER_STACK, task);
  d->cpu_time_ns = 0;
  d->state = 0;
  d->flags = 0;
  capture_dwarf_stacks(ctx, d, true, true);
  send_python_stack(&d->header);
  send_dwarf_event(d);
}

#define ENOSYS_ERRNO 38

/* Whether a thread on its own kernel stack is in a system call. An interrupt that arrives while
 * the CPU runs user code runs on the task's stack too (there is nothing else on it), with the
 * interrupt's frame as the saved user registers: a system call's frame holds its number in
 * orig_ax and -ENOSYS in ax until it returns; an interrupt's holds -1 or its vector, and the
 * user's rax. */
static __always_inline bool in_system_call(struct task_struct* task) {
  if (task->flags & PF_KTHREAD_FLAG) return true; /* never in user mode: on its stack, its own */
  struct pt_regs* regs = (struct pt_regs*)bpf_task_pt_regs(task);
  if (!regs) return false;
  return (long)regs->orig_ax >= 0 && (long)regs->ax == -ENOSYS_ERRNO; /* BTF loads: no helper */
}

/* A tracked thread is woken: who did it (a thread, or an interrupt), and from where. Fires in
 * the waker's context, always (sched_wakeup may run later on the wakee's CPU, from an IPI). */
SEC("tp_btf/sched_waking")
int BPF_PROG(on_waking, struct task_struct* p) {
  const __u32 wakee_tgid = p->tgid;
  if (!record_wakers || !is_tracked(wakee_tgid)) return 0;
  struct bpfprof_waking_event* e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
  if (!e) {
    count_lost_for(wakee_tgid);
    return 0;
  }
  fill_header(&e->header, BPFPROF_EVENT_WAKING, wakee_tgid, p->pid);
  struct task_struct* task = bpf_get_current_task_btf();
  const __u32 context = on_task_stack(ctx, task) && in_system_call(task) ? BPFPROF_WAKER_TASK
                                                                         : BPFPROF_WAKER_INTERRUPT;
  const bool thread = context == BPFPROF_WAKER_TASK;
  e->context = context;
  e->waker_pid = thread ? task->tgid : 0;
  e->waker_tid = thread ? task->pid : 0;
  __builtin_memset(e->waker_comm, 0, sizeof(e->waker_comm));
  if (thread) __builtin_memcpy(e->waker_comm, task->comm, sizeof(e->waker_comm));
  struct waker_pair pair = {.waker_tid = e->waker_tid, .context = context, .wakee_tid = p->pid};
  const __u64 now = e->header.timestamp_ns;
  __u64* taken = bpf_map_lookup_elem(&waker_stack_taken, &pair);
  const bool follows = !taken || now - *taken >= off_cpu_stack_interval_ns;
  if (follows) bpf_map_update_elem(&waker_stack_taken, &pair, &now, BPF_ANY);
  /* Asked only for a stack taken now: most wakeups reuse one. */
  const bool user_context = thread && task->mm;
  const bool with_user = follows && user_context && is_tracked(task->tgid);
  e->flags = follows ? BPFPROF_WAKER_STACK_FOLLOWS : BPFPROF_WAKER_STACK_REUSED;
  if (follows && user_context && !with_user) e->flags |= BPFPROF_WAKER_USER_STACK_SKIPPED;
  const struct bpfprof_event_header header = e->header;
  bpf_ringbuf_submit(e, submit_flags());
  if (follows) send_waker_stack(ctx, &header, with_user);
  return 0;
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(on_fork, struct task_struct* parent, struct task_struct* child) {
  __u32 parent_tgid = parent->tgid;
  if (!is_tracked(parent_tgid)) return 0;
  __u32 child_tgid = child->tgid;
  if (!track_all && child_tgid != parent_tgid) {
    __u8 one = BPFPROF_TRACKED;
    /* The map is full: the child (and what it starts) goes unsampled; counted, so the
     * summary says so. */
    if (bpf_map_update_elem(&tracked_processes, &child_tgid, &one, BPF_ANY)) {
      __u32 zero = 0;
      __u64* not_followed = bpf_map_lookup_elem(&processes_not_followed, &zero);
      if (not_followed) __sync_fetch_and_add(not_followed, 1);
    }
  }
  /* A new process starts with a copy of its parent's address space: the parent's mappings
   * walk its stacks until userspace writes its own entry (the same mappings) or its exec
   * removes it. Without this its first samples fall back to stack copies. */
  if (kernel_unwind && child_tgid != parent_tgid) {
    struct bpfprof_process_mappings* pm = bpf_map_lookup_elem(&unwind_processes, &parent_tgid);
    if (pm) bpf_map_update_elem(&unwind_processes, &child_tgid, pm, BPF_NOEXIST);
  }
  struct bpfprof_fork_event* e = bpf_ringbuf_reserve(&lifecycle_events, sizeof(*e), 0);
  if (!e) {
    count_lost();
    return 0;
  }
  fill_header(&e->header, BPFPROF_EVENT_FORK, parent_tgid, parent->pid);
  e->child_pid = child_tgid;
  e->child_tid = child->pid;
  bpf_probe_read_kernel_str(e->child_comm, sizeof(e->child_comm), child->comm);
  bpf_ringbuf_submit(
      e, child_tgid != parent_tgid ? new_process_submit_flags() : lifecycle_submit_flags());
  return 0;
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(on_exec, struct task_struct* task, pid_t old_tid, struct linux_binprm* bprm) {
  __u32 tgid = task->tgid;
  const __u8 tracked = tracked_state(tgid);
  if (!tracked) return 0;
  if (tracked == BPFPROF_TRACKED_AWAITING_EXEC) {
    const __u8 now_tracked = BPFPROF_TRACKED;
    bpf_map_update_elem(&tracked_processes, &tgid, &now_tracked, BPF_EXIST);
  }
  /* The old image's mappings must not walk the new one's stacks: the new one's as they are
   * now, else none (its samples fall back to stack copies until userspace has them). */
  if (kernel_unwind && !image_mappings_write(task, tgid))
    bpf_map_delete_elem(&unwind_processes, &tgid);
  struct bpfprof_exec_event* e = bpf_ringbuf_reserve(&lifecycle_events, sizeof(*e), 0);
  if (!e) {
    count_lost();
    return 0;
  }
  fill_header(&e->header, BPFPROF_EVENT_EXEC, tgid, task->pid);
  e->old_tid = old_tid;
  e->euid = BPF_CORE_READ(task, cred, euid.val);
  bpf_probe_read_kernel_str(e->comm, sizeof(e->comm), task->comm);
  bpf_probe_read_kernel_str(e->filename, sizeof(e->filename), bprm->filename);
  bpf_ringbuf_submit(e, new_process_submit_flags());
  return 0;
}

/* A young image's mmap (ld.so mapping the libraries): its entry again, while it is the one
 * written here (the generation's top bit) and not yet userspace's. At the start of each
 * write lock of the process's own address space, before the lock is taken (the VMA iterator
 * only trylocks): so the entry holds the mappings up to the last change, and ld.so's
 * mprotects after its last mmap bring that one in. Not on the sys_exit_mmap tracepoint: a
 * system-call tracepoint in use sends every system call of every task through the slow entry
 * and exit paths (getppid: +60-80 ns a call), a cost perf does not charge. (fexit on
 * vm_mmap_pgoff is refused on this VM.) */
SEC("tp_btf/mmap_lock_start_locking")
int BPF_PROG(on_mmap_lock, struct mm_struct* mm, bool write) {
  if (!write) return 0;
  struct task_struct* task = bpf_get_current_task_btf();
  if (task->mm != mm) return 0; /* another process's address space (ptrace, /proc) */
  if (!kernel_unwind) return 0;
  const __u32 tgid = bpf_get_current_pid_tgid() >> 32;
  if (!is_tracked(tgid)) return 0;
  const struct bpfprof_process_mappings* pm = bpf_map_lookup_elem(&unwind_processes, &tgid);
  if (!pm || !(pm->generation & BPFPROF_KERNEL_WRITTEN_GENERATION)) return 0;
  image_mappings_write(task, tgid);
  return 0;
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(on_exit, struct task_struct* task, bool group_dead) {
  __u32 tgid = task->tgid;
  if (!is_tracked(tgid)) return 0;
  struct bpfprof_exit_event* e = bpf_ringbuf_reserve(&lifecycle_events, sizeof(*e), 0);
  if (e) {
    fill_header(&e->header, BPFPROF_EVENT_EXIT, tgid, task->pid);
    e->cpu_time_ns = task->se.sum_exec_runtime;
    e->exit_code = task->exit_code;
    e->group_dead = group_dead;
    bpf_probe_read_kernel_str(e->comm, sizeof(e->comm), task->comm);
    bpf_ringbuf_submit(e, lifecycle_submit_flags());
  } else {
    count_lost();
  }
  if (group_dead && !track_all) bpf_map_delete_elem(&tracked_processes, &tgid);
  /* Userspace removes it too when it reads the exit; a reused pid must not find it meanwhile. */
  if (group_dead && kernel_unwind) bpf_map_delete_elem(&unwind_processes, &tgid);
  return 0;
}

SEC("tp_btf/task_rename")
int BPF_PROG(on_rename, struct task_struct* task, const char* comm) {
  __u32 tgid = task->tgid;
  if (!is_tracked(tgid)) return 0;
  /* exec renames the task before its exec event; that name belongs to the new image and
   * comes with the exec event itself. */
  if (BPF_CORE_READ_BITFIELD(task, in_execve)) return 0;
  struct bpfprof_comm_event* e = bpf_ringbuf_reserve(&lifecycle_events, sizeof(*e), 0);
  if (!e) {
    count_lost();
    return 0;
  }
  fill_header(&e->header, BPFPROF_EVENT_COMM, tgid, task->pid);
  bpf_probe_read_kernel_str(e->comm, sizeof(e->comm), comm);
  bpf_ringbuf_submit(e, lifecycle_submit_flags());
  return 0;
}
