// SPDX-License-Identifier: GPL-2.0
/* The kernel side of bpfprof: a timer-sample program, the off-CPU and waker tracepoints, and
 * the lifecycle tracepoints that keep the set of tracked processes in the kernel, so that a
 * child of a tracked process is sampled from its first instruction.
 *
 * In one order, as bcc's libbpf-tools lay their programs out: the settings userspace writes
 * before load (knobs.h), the shared maps (maps.h), the helpers shared by several programs,
 * each header including what it uses (helpers.h; stack_events.h, which takes stacks with
 * stack_copy.h, the in-kernel walker unwind_user.h and the runtimes' frame readers;
 * image_mappings.h), the runtimes' kernel sides, which define the runtimes' calls that the
 * stack events and the walker make (runtimes/kernel_side.bpf.h: their frame readers and maps,
 * send_runtime_stacks, the steps through their own code), then the programs in this file,
 * each with the helpers only it uses just above it: samples, switch-outs, wakers, lifecycle. */
#include "vmlinux.h"

#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "bpf/events.h"
#include "bpf/knobs.h"
#include "bpf/maps.h"
#include "bpf/tp_btf.h"

#include "bpf/address_space_probes.h"
#include "bpf/allocator_probes.h"
#include "bpf/cgroup_filter.h"
#include "bpf/helpers.h"
#ifndef BPFPROF_WALKER_OBJECT
#include "bpf/image_mappings.h"
#endif
#include "bpf/stack_events.h"
#include "bpf/unwind_maps.h"
#include "runtimes/kernel_side.bpf.h" /* the runtimes: their readers, stacks and code steps */

char LICENSE[] SEC("license") = "GPL";

/* Whether the timer interrupted user code: the kernel stack is then empty, and the helper
 * that would find that out need not run. */
static __always_inline bool interrupted_user_mode(struct bpf_perf_event_data* ctx) {
  /* A whole-word load: the verifier refuses the narrower one `& 3` would compile to. */
  const __u64 cs = *(volatile __u64*)&ctx->regs.cs;
  return (cs & 3) == 3;
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
    send_exec_stack(ctx, current, BPFPROF_CONTEXT_SAMPLE, SAMPLE_SLOT, 0);
    return 0;
  }
  struct bpfprof_stack_event_head head;
  stack_head(&head, current, BPFPROF_CONTEXT_SAMPLE, 0, 0);
  send_stack(ctx, &head, SAMPLE_SLOT, true, !interrupted_user_mode(ctx), true);
  return 0;
}

/* record --memory: the kernel's page-fault event (user code's faults only) calls this at
 * every BPFPROF_PAGE_FAULT_PERIOD faults on the CPU: a tracked thread's fault is where its
 * process's resident memory grows (a page first touched, a file page mapped, a copy on write,
 * a page swapped in), and its stacks are taken as a sample's. Which kind of memory the fault
 * is in is not looked up: bpf_find_vma took 16 us here, the walk after it 1. */
SEC("perf_event")
int on_page_fault(struct bpf_perf_event_data* ctx) {
  const __u32 tgid = bpf_get_current_pid_tgid() >> 32;
  if (tracked_state(tgid) != BPFPROF_TRACKED) return 0;
  struct task_struct* current = bpf_get_current_task_btf();
  struct bpfprof_stack_event_head head;
  stack_head(&head, current, BPFPROF_CONTEXT_PAGE_FAULT, 0, 0);
  send_stack(ctx, &head, SAMPLE_SLOT, true, false, true);
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

/* Whether a thread leaving the CPU is worth its kernel stack. Not so for one preempted on its
 * way back to user mode from an interrupt (the timer's, a wakeup's): that stack is always the
 * exit path (..._interrupt < irqentry_exit_to_user_mode < schedule) and says nothing the
 * "waiting for CPU" frame does not, yet taking it at a context switch costs more than the user
 * walk (bench/bpf_runtime.sh measures on_switch). Such a thread is runnable without being
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
 * system call within the interval would sleep in the loop's stack, which on a busy machine is
 * most of a sleeper's sleep. Else `taken` becomes this stop, whose stacks the caller takes. */
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

/* The switch-out of a thread leaving the CPU with off-CPU stacks on: its stacks at that
 * moment, unless those of its last stop stand for them (reuse_or_claim_off_cpu_stacks). */
static __always_inline void send_off_cpu_stacks(void* ctx, struct task_struct* prev, __u8 tracked,
                                                bool preempt, unsigned int prev_state,
                                                __u32 state) {
  if (tracked == BPFPROF_TRACKED_AWAITING_EXEC || in_exec_without_user_stack(prev)) {
    send_exec_stack(ctx, prev, BPFPROF_CONTEXT_SWITCH_OUT, TRACEPOINT_SLOT, state);
    return;
  }
  const struct off_cpu_stop* stop = off_cpu_stop_of(prev, preempt, prev_state);
  const bool reuse = reuse_or_claim_off_cpu_stacks(prev, stop);
  struct bpfprof_stack_event_head head;
  stack_head(&head, prev, BPFPROF_CONTEXT_SWITCH_OUT, state,
             reuse ? BPFPROF_SWITCH_STACK_REUSED : 0);
  /* prev is still the current task here: these are the stacks it sleeps in. */
  send_stack(ctx, &head, TRACEPOINT_SLOT, !reuse, !reuse && (!stop || stop->with_kernel_stack),
             !reuse);
}

SEC(TP_BTF("sched_switch"))
int BPF_PROG(on_switch, bool preempt, struct task_struct* prev, struct task_struct* next,
             unsigned int prev_state) {
  __u32 zero = 0;
  __u32* last_sampled = bpf_map_lookup_elem(&sampled_tid, &zero);
  const bool was_sampled = last_sampled && *last_sampled == prev->pid;
  if (last_sampled) *last_sampled = 0;

  /* A dying thread's exit event ends it; anything else leaving the CPU is off-CPU time. */
  const __u8 tracked = prev_state & TASK_DEAD_STATE ? 0 : tracked_state(prev->tgid);
  const __u32 state = off_cpu_state(preempt, prev_state);
  if (tracked && record_off_cpu) {
    send_off_cpu_stacks(ctx, prev, tracked, preempt, prev_state, state);
  } else if (tracked && marks_stop_without_off_cpu(prev, was_sampled, state)) {
    struct bpfprof_stack_event_head head;
    stack_head(&head, prev, BPFPROF_CONTEXT_SWITCH_OUT, state, 0);
    send_stack(ctx, &head, TRACEPOINT_SLOT, false, false, false);
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

/* The waker's stacks, after its waking event (same cpu and timestamp, the waker's pid and
 * tid), unwound as a sample's. `with_user`: a thread of a tracked process in process context,
 * with its runtimes' frames; else the kernel stack only (an interrupt's wakeup says nothing of
 * the interpreter it interrupted, whose frames would have no user stack to go in). sched_waking
 * runs with interrupts off (under the wakee's pi_lock), as sched_switch does, so the two share
 * scratch space without ever nesting. */
static __always_inline void send_waker_stack(void* ctx, const struct bpfprof_event_header* waking,
                                             bool with_user) {
  struct task_struct* task = bpf_get_current_task_btf();
  struct bpfprof_stack_event_head head = {.context = BPFPROF_CONTEXT_WAKER};
  head.header = *waking;
  head.header.kind = BPFPROF_EVENT_STACK;
  head.header.pid = task->tgid;
  head.header.tid = task->pid;
  send_stack(ctx, &head, TRACEPOINT_SLOT, with_user, true, with_user);
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
SEC(TP_BTF("sched_waking"))
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
  const bool user_context = thread && BPF_CORE_READ(task, mm); /* read: see stack_copy.h */
  const bool with_user = follows && user_context && is_tracked(task->tgid);
  e->flags = follows ? BPFPROF_WAKER_STACK_FOLLOWS : BPFPROF_WAKER_STACK_REUSED;
  if (follows && user_context && !with_user) e->flags |= BPFPROF_WAKER_USER_STACK_SKIPPED;
  const struct bpfprof_event_header header = e->header;
  bpf_ringbuf_submit(e, submit_flags());
  if (follows) send_waker_stack(ctx, &header, with_user);
  return 0;
}

#ifndef BPFPROF_WALKER_OBJECT /* the walkers' dispatchers and the lifecycle programs */

/* The walker programs above run from walker objects of their own (bpf_walkers.cpp), each
 * through a slot that the program attached in its place tail-calls: userspace fills the slots
 * with walkers built without the runtimes' readers (half the verifier's time, so sampling
 * starts sooner), then puts the full walkers in their place once loaded; the slot makes the
 * swap atomic. A tracing program's slot takes programs of its own tracepoint only. */
#define WALKER_SLOT(name)                  \
  struct {                                 \
    __uint(type, BPF_MAP_TYPE_PROG_ARRAY); \
    __uint(max_entries, 1);                \
    __type(key, __u32);                    \
    __type(value, __u32);                  \
  } name SEC(".maps")
WALKER_SLOT(sample_walker);
WALKER_SLOT(switch_walker);
WALKER_SLOT(waking_walker);

SEC("perf_event")
int dispatch_sample(struct bpf_perf_event_data* ctx) {
  bpf_tail_call(ctx, &sample_walker, 0);
  return 0;
}

SEC("tp_btf/sched_switch")
int dispatch_switch(__u64* ctx) {
  bpf_tail_call(ctx, &switch_walker, 0);
  return 0;
}

SEC("tp_btf/sched_waking")
int dispatch_waking(__u64* ctx) {
  bpf_tail_call(ctx, &waking_walker, 0);
  return 0;
}

/* Tracks a process (a child of a tracked one, or one that exec'd in a recorded cgroup). When
 * the map is full, it (and what it starts) goes unsampled; counted, so the summary says so. */
static __always_inline void follow_process(__u32 tgid) {
  if (track_all) return; /* every process is: the table is not used */
  const __u8 one = BPFPROF_TRACKED;
  if (bpf_map_update_elem(&tracked_processes, &tgid, &one, BPF_ANY)) {
    __u32 zero = 0;
    __u64* not_followed = bpf_map_lookup_elem(&processes_not_followed, &zero);
    if (not_followed) __sync_fetch_and_add(not_followed, 1);
  }
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(on_fork, struct task_struct* parent, struct task_struct* child) {
  __u32 parent_tgid = parent->tgid;
  if (!is_tracked(parent_tgid)) return 0;
  __u32 child_tgid = child->tgid;
  if (!track_all && child_tgid != parent_tgid) {
    follow_process(child_tgid);
  }
  /* A new process starts with a copy of its parent's address space: the parent's mappings
   * walk its stacks until userspace writes its own entry (the same mappings) or its exec
   * removes it. Without this its first samples fall back to stack copies. */
  if (child_tgid != parent_tgid) inherit_stack_copy_size(parent_tgid, child_tgid);
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
  __u8 tracked = tracked_state(tgid);
  /* record --cgroup: a process that starts in a recorded cgroup (a container's init, a
   * service, `docker exec`) is recorded from its exec on: tracked once its exec event has its
   * time, so that no sample (one taken while this program runs) comes before it. */
  const bool joins = !tracked && in_filtered_cgroup(task);
  if (joins) tracked = BPFPROF_TRACKED;
  if (!tracked) return 0;
  if (tracked == BPFPROF_TRACKED_AWAITING_EXEC) {
    const __u8 now_tracked = BPFPROF_TRACKED;
    bpf_map_update_elem(&tracked_processes, &tgid, &now_tracked, BPF_EXIST);
  }
  /* The old image's mappings must not walk the new one's stacks: the new one's as they are
   * now, else none (its samples fall back to stack copies until userspace has them). */
  if (kernel_unwind && !image_mappings_write(task, tgid))
    bpf_map_delete_elem(&unwind_processes, &tgid);
  stack_copy_size_at_exec(tgid, bprm->file);
  struct bpfprof_exec_event* e = bpf_ringbuf_reserve(&lifecycle_events, sizeof(*e), 0);
  if (!e) {
    count_lost();
    if (joins) follow_process(tgid);
    return 0;
  }
  fill_header(&e->header, BPFPROF_EVENT_EXEC, tgid, task->pid);
  if (joins) follow_process(tgid);
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
 * and exit paths, a cost perf does not charge. (Some kernels refuse fexit on
 * vm_mmap_pgoff.) */
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

/* record --memory: a resident-memory counter of an address space changed (each page mapped
 * or unmapped, in batches). Sent for a tracked process when its resident bytes moved by a
 * step since the last sent: its memory over time, within a step of each peak. */
SEC("tp_btf/rss_stat")
int BPF_PROG(on_rss_stat, struct mm_struct* mm, int member) {
  (void)member;
  if (!record_memory || !mm) return 0;
  __s64 pages[4];
  for (int i = 0; i < 4; ++i) pages[i] = mm->rss_stat[i].count; /* BTF loads: no helper */
  __u32 zero = 0;
  struct rss_seen* seen = bpf_map_lookup_elem(&rss_last_seen, &zero);
  const __s64 all = pages[0] + pages[1] + pages[2] + pages[3];
  if (seen) {
    if (seen->mm == (__u64)mm && seen->pages == all) return 0;
    seen->mm = (__u64)mm;
    seen->pages = all;
  }
  struct task_struct* task = bpf_get_current_task_btf();
  /* Another task's (reclaim, a process exiting): its owner's, where the kernel keeps one. */
  const __u32 tgid = task->mm == mm ? task->tgid : BPF_CORE_READ(mm, owner, tgid);
  if (!tgid || !is_tracked(tgid)) return 0;
  const __u64 page = 4096;
  const __u64 resident =
      (pages[0] > 0 ? pages[0] : 0) + (pages[1] > 0 ? pages[1] : 0) + (pages[3] > 0 ? pages[3] : 0);
  const __u64 bytes = resident * page;
  __u64* sent = bpf_map_lookup_elem(&memory_sent, &tgid);
  if (sent && (bytes > *sent ? bytes - *sent : *sent - bytes) < BPFPROF_MEMORY_STEP_BYTES) return 0;
  struct bpfprof_memory_event* e = bpf_ringbuf_reserve(&lifecycle_events, sizeof(*e), 0);
  if (!e) {
    count_lost();
    return 0;
  }
  fill_header(&e->header, BPFPROF_EVENT_MEMORY, tgid, task->mm == mm ? task->pid : tgid);
  e->file_bytes = (pages[0] > 0 ? pages[0] : 0) * page;
  e->anon_bytes = (pages[1] > 0 ? pages[1] : 0) * page;
  e->swap_bytes = (pages[2] > 0 ? pages[2] : 0) * page;
  e->shmem_bytes = (pages[3] > 0 ? pages[3] : 0) * page;
  bpf_ringbuf_submit(e, lifecycle_submit_flags());
  if (sent)
    *sent = bytes;
  else
    bpf_map_update_elem(&memory_sent, &tgid, &bytes, BPF_ANY);
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

#endif /* BPFPROF_WALKER_OBJECT */
