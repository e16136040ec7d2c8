/* Events sent from the BPF programs to userspace through the ring buffer.
 * Shared by bpf/profiler.bpf.c and userspace: plain C, fixed-size fields only. */
#ifndef BPFPROF_EVENTS_H
#define BPFPROF_EVENTS_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

#include "bpf/runtime_list.h"

/* perf's default kernel.perf_event_max_stack. */
#define BPFPROF_MAX_STACK_DEPTH 127

/* The only user "frame" of a sample taken inside execve once the old image is gone (the new
 * address space is in; the saved user registers still point into the old one, so there is
 * no user stack to walk or copy): a raw address no code has (not canonical), which the
 * model turns into the [exec] pseudo-frame. Userspace keeps Python frames at 1 << 60. */
#define BPFPROF_RAW_EXEC_FRAME (2ull << 60)

/* record --cgroup: a subtree of a cgroup hierarchy. A task is in it when its cgroup of that
 * hierarchy (v2's, or the one of v1 controller `subsys`, an enum cgroup_subsys_id value) has
 * the subtree's root as its ancestor at `level` (the root's depth), by its kernfs id (the
 * directory's inode number). */
#define BPFPROF_MAX_CGROUP_FILTERS 8
#define BPFPROF_CGROUP_V2 (-1)
struct bpfprof_cgroup_filter {
  __u64 id;
  __u32 level;
  __s32 subsys; /* BPFPROF_CGROUP_V2 or a v1 controller's id */
};

/* tracked_processes values. A command bpfprof launches is tracked from its fork, so that
 * nothing of it is missed, but until its exec it runs bpfprof's launcher: its samples and
 * switch-outs then get the exec pseudo-frame (above the kernel stack), not bpfprof's frames. */
#define BPFPROF_TRACKED 1
#define BPFPROF_TRACKED_AWAITING_EXEC 2
#define BPFPROF_COMM_LEN 16
#define BPFPROF_PATH_LEN 256

enum bpfprof_event_kind {
  /* A thread's stacks: a bpfprof_stack_event_head, whose `context` says when they were taken
   * and whose `payload` says in which form they follow. */
  BPFPROF_EVENT_STACK = 1,
  BPFPROF_EVENT_FORK = 2, /* a new thread or process */
  BPFPROF_EVENT_EXEC = 3,
  BPFPROF_EVENT_EXIT = 4,      /* a thread exits (group_dead: the last one of its process) */
  BPFPROF_EVENT_COMM = 5,      /* a thread was renamed (prctl, pthread_setname_np, exec) */
  BPFPROF_EVENT_SWITCH_IN = 6, /* a thread that left the CPU runs again (just the header) */
  /* A tracked thread is woken (sched_waking): who woke it (bpfprof_waking_event). */
  BPFPROF_EVENT_WAKING = 7,
  /* record --memory: a process's resident memory changed (bpfprof_memory_event). */
  BPFPROF_EVENT_MEMORY = 32,
  /* record --allocations: a sampled allocator call (bpfprof_allocation_event). */
  BPFPROF_EVENT_ALLOCATION = 33,
  /* record --memory: a sampled change of the address space (bpfprof_address_space_event). */
  BPFPROF_EVENT_ADDRESS_SPACE = 34,
/* A runtime's frames (bpf/runtime_list.h): BPFPROF_EVENT_<ID>_STACK. */
#define BPFPROF_RUNTIME_EVENT_KIND(ID, id, Kind, language, colour, event) \
  BPFPROF_EVENT_##ID##_STACK = event,
  BPFPROF_RUNTIME_LIST(BPFPROF_RUNTIME_EVENT_KIND)
#undef BPFPROF_RUNTIME_EVENT_KIND
};

/* The runtimes whose own frames the BPF side reads (runtimes/<name>/frames.bpf.h), as
 * indexes in bpf/runtime_list.h's order: userspace's RuntimeKind has the same values. */
enum bpfprof_runtime {
#define BPFPROF_RUNTIME_INDEX(ID, id, Kind, language, colour, event) BPFPROF_RUNTIME_##ID,
  BPFPROF_RUNTIME_LIST(BPFPROF_RUNTIME_INDEX)
#undef BPFPROF_RUNTIME_INDEX
      BPFPROF_RUNTIMES, /* how many */
};

/* When a stack event's stacks were taken. */
enum bpfprof_stack_context {
  BPFPROF_CONTEXT_SAMPLE = 1, /* a timer sample */
  /* The thread left the CPU (`state` says why). Without off-CPU stacks, or with its last ones
   * reused, no stack is taken: the event ends the thread's stretch on the CPU. */
  BPFPROF_CONTEXT_SWITCH_OUT = 2,
  /* The waker of the waking event just before it on the same CPU with the same timestamp
   * (header pid/tid: the waker's). */
  BPFPROF_CONTEXT_WAKER = 3,
  /* record --memory: a page fault of user code (a page first touched, mapped from a file,
   * copied on write, swapped in), one in every BPFPROF_PAGE_FAULT_PERIOD of the CPU's. */
  BPFPROF_CONTEXT_PAGE_FAULT = 4,
  /* record --allocations: a sampled malloc, calloc or realloc returned, or a sampled block
   * was freed; the bpfprof_allocation_event after it (same cpu and time) says which. */
  BPFPROF_CONTEXT_ALLOCATION = 5,
  /* record --memory: a sampled mmap, munmap, brk or mremap returned; the
   * bpfprof_address_space_event after it (same cpu and time) says what it did. */
  BPFPROF_CONTEXT_ADDRESS_SPACE = 6,
};

/* The system calls that grow or shrink an address space, as record --memory samples them. */
enum bpfprof_address_space_call {
  BPFPROF_ADDRESS_SPACE_MMAP = 1,
  BPFPROF_ADDRESS_SPACE_MUNMAP = 2,
  BPFPROF_ADDRESS_SPACE_BRK = 3,
  BPFPROF_ADDRESS_SPACE_MREMAP = 4,
};

/* The allocator calls the uprobes of record --allocations see (their bpf cookie). */
enum bpfprof_allocator_call {
  BPFPROF_ALLOCATOR_MALLOC = 1,
  BPFPROF_ALLOCATOR_CALLOC = 2,
  BPFPROF_ALLOCATOR_REALLOC = 3,
  BPFPROF_ALLOCATOR_FREE = 4,
  BPFPROF_ALLOCATOR_MEMALIGN = 5,       /* memalign, aligned_alloc (align, size) */
  BPFPROF_ALLOCATOR_POSIX_MEMALIGN = 6, /* (&block, align, size): 0 and the block */
};

/* The byte sampling's countdowns (--allocations', --memory's address-space calls) are the
 * mean interval times one of these, in 1/1024ths: an exponential distribution's quantiles. */
#define BPFPROF_ALLOCATION_QUANTILES 256

/* record --memory: the mean bytes by which an address space grows or shrinks between two
 * sampled system calls that change it (the countdowns drawn as the allocations' are). */
#define BPFPROF_ADDRESS_SPACE_PERIOD (1024 * 1024)

/* The page faults a page-fault sample stands for: the kernel's page-fault software event
 * calls the program at every this many faults of user code on a CPU (a walk costs some 3 us,
 * a fault 1-2 us). */
#define BPFPROF_PAGE_FAULT_PERIOD 64

/* The form in which a stack event's stacks follow its head: the call-graph mode's, in any
 * context. */
enum bpfprof_stack_payload {
  /* bpfprof_frames_event, user frames walked by frame pointers (--call-graph fp). */
  BPFPROF_PAYLOAD_FP_FRAMES = 1,
  /* bpfprof_frames_event, user frames walked in the kernel with the unwind tables up to a
   * thread root; a walk that cannot reach one sends a copy instead. */
  BPFPROF_PAYLOAD_UNWOUND_FRAMES = 2,
  /* bpfprof_copy_event: user registers and a stack copy, unwound in userspace. */
  BPFPROF_PAYLOAD_COPY = 3,
};

/* The largest user-stack copy per sample (--call-graph dwarf,SIZE), as perf allows. */
#define BPFPROF_MAX_STACK_COPY 65528
/* The copy buffer: one page more than the largest copy, so that the verifier can see that a
 * page-sized read at any offset below BPFPROF_MAX_STACK_COPY stays inside it. */
#define BPFPROF_STACK_BUFFER (65536 + 4096)
/* x86-64 user registers in DWARF numbering: rax rdx rcx rbx rsi rdi rbp rsp r8-r15, rip (16). */
#define BPFPROF_USER_REGS 17
#define BPFPROF_REG_BP 6
#define BPFPROF_REG_SP 7
#define BPFPROF_REG_IP 16

/* Why a thread left the CPU. */
enum bpfprof_off_cpu_state {
  BPFPROF_OFF_CPU_SLEEPING = 1,    /* interruptible sleep (or an idle kernel wait) */
  BPFPROF_OFF_CPU_IO_WAIT = 2,     /* uninterruptible sleep: D state */
  BPFPROF_OFF_CPU_WAITING_CPU = 3, /* preempted while runnable */
};

struct bpfprof_event_header {
  __u32 kind;
  __u32 cpu;
  __u64 timestamp_ns; /* CLOCK_MONOTONIC */
  __u32 pid;          /* tgid */
  __u32 tid;
};

/* The start of every stack event (BPFPROF_EVENT_STACK). */
struct bpfprof_stack_event_head {
  struct bpfprof_event_header header;
  __u64 cpu_time_ns; /* the thread's sum_exec_runtime so far (exact at a switch); waker: 0 */
  __u8 context;      /* enum bpfprof_stack_context */
  __u8 payload;      /* enum bpfprof_stack_payload */
  __u8 state;        /* BPFPROF_CONTEXT_SWITCH_OUT: enum bpfprof_off_cpu_state */
  __u8 flags;        /* BPFPROF_SWITCH_STACK_REUSED, BPFPROF_STACK_COPY_* */
  __u32 user_depth;  /* frames: the user frames in `ips`; a copy: 0 */
  /* The kernel frames: after the user ones in `ips`, or in `kernel_ips`. */
  __u32 kernel_depth;
  __u32 reserved;
};

/* The thread's stacks were captured less than a sampling interval ago: none was taken now
 * (walking stacks at every switch of a switch-heavy thread costs more than it tells), the
 * last one stands for this wait too. */
#define BPFPROF_SWITCH_STACK_REUSED 1u

/* The stack copy stopped at the configured size before the end of the stack mapping: frames
 * above it can only be unwound with a larger --call-graph dwarf,SIZE. */
#define BPFPROF_STACK_COPY_AT_LIMIT 2u
/* Some pages of the copy could not be read (left zeroed; never touched, or past the end of
 * the mapping when its end was unknown). */
#define BPFPROF_STACK_COPY_UNREADABLE 4u

/* The most user frames the in-kernel walk follows. A deeper stack (GCC's garbage collector
 * recurses thousands deep) is cut there: its innermost frames are sent, and the profile roots
 * them at [truncated]. A stack copy would give no more (userspace unwinds as many frames), at
 * the cost of a whole-stack copy and its unwinding. The index is masked to this array's
 * bound (BPFPROF_UNWOUND_INDEX_MASK) for the verifier. */
#define BPFPROF_MAX_UNWOUND_FRAMES 1023
#define BPFPROF_UNWOUND_INDEX_MASK 0x3ff

/* BPFPROF_PAYLOAD_FP_FRAMES and _UNWOUND_FRAMES: `ips` holds user_depth user frames (the
 * innermost pc, then return addresses; walked in the kernel, the outermost one in the
 * thread's root function, and the pc interrupted by a signal and its trampoline's one byte
 * past the instruction, as a return address is), then kernel_depth kernel frames. Only the
 * used part is sent. */
struct bpfprof_frames_event {
  struct bpfprof_stack_event_head head;
  __u64 ips[BPFPROF_MAX_UNWOUND_FRAMES + BPFPROF_MAX_STACK_DEPTH];
};

/* BPFPROF_PAYLOAD_COPY: the thread's user registers (all of them: CFI rules may use any, e.g.
 * the PLT's rip-based CFA) and a copy of its user stack from sp, `stack_size` bytes: every
 * readable byte up to the end of the stack mapping, at most the configured size; then its
 * kernel stack. Only the used part of `stack` is sent. */
struct bpfprof_copy_event {
  struct bpfprof_stack_event_head head;
  __u64 user_regs[BPFPROF_USER_REGS]; /* DWARF numbering; all 0 without a user context */
  __u32 stack_size;
  __u32 stack_copy_limit;   /* the most bytes this copy could take (the process's size then) */
  __u32 stack_bytes_wanted; /* what it tried to copy: the limit, or less where the stack ends */
  __u32 reserved;
  /* Where the walk in the kernel that this copy stands for stopped at a mapping whose table
   * is not loaded (BPFPROF_FALLBACK_NOT_LOADED): userspace builds that table first. 0 else. */
  __u64 unloaded_table_pc;
  __u64 kernel_ips[BPFPROF_MAX_STACK_DEPTH];
  __u8 stack[BPFPROF_STACK_BUFFER];
};

/* What a waking ran in. */
enum bpfprof_waker_context {
  BPFPROF_WAKER_TASK = 1, /* a thread, in process context: waker_pid/tid/comm */
  /* An interrupt handler (a timer's expiry: nanosleep, timeouts) or a softirq run after one
   * (network, RCU), whatever thread it interrupted; its kernel stack says which. */
  BPFPROF_WAKER_INTERRUPT = 2,
};

/* A stack event of the waker (BPFPROF_CONTEXT_WAKER) follows with the same cpu and time. */
#define BPFPROF_WAKER_STACK_FOLLOWS 1u
/* No stack taken: one was for this (waker, wakee) pair less than an interval ago, and stands
 * for this waking too. */
#define BPFPROF_WAKER_STACK_REUSED 2u
/* With BPFPROF_WAKER_STACK_FOLLOWS: the waker is a thread of a process that is not tracked,
 * its kernel stack only (the user stack cannot be walked without the process's unwind tables
 * and mappings). */
#define BPFPROF_WAKER_USER_STACK_SKIPPED 4u

/* header pid/tid: the woken thread; waker_* as the context says (0 and "" for interrupts). */
struct bpfprof_waking_event {
  struct bpfprof_event_header header;
  __u32 waker_pid;
  __u32 waker_tid;
  char waker_comm[BPFPROF_COMM_LEN];
  __u32 context; /* enum bpfprof_waker_context */
  __u32 flags;   /* BPFPROF_WAKER_* */
};

struct bpfprof_fork_event {
  struct bpfprof_event_header header; /* pid/tid: the parent */
  __u32 child_pid;
  __u32 child_tid;
  char child_comm[BPFPROF_COMM_LEN];
};

struct bpfprof_exec_event {
  struct bpfprof_event_header header;
  __u32 old_tid; /* a non-leader thread that execs takes over the leader's tid */
  __u32 euid;    /* the new image's effective user: who may write its perf map */
  char comm[BPFPROF_COMM_LEN];
  char filename[BPFPROF_PATH_LEN];
};

struct bpfprof_exit_event {
  struct bpfprof_event_header header;
  __u64 cpu_time_ns; /* final sum_exec_runtime of the thread */
  __s32 exit_code;   /* as in wait(2) status */
  __u32 group_dead;  /* 1 if this was the last thread of the process */
  char comm[BPFPROF_COMM_LEN];
};

/* A process's resident memory as the kernel counts it (its mm's rss_stat counters, in bytes),
 * sent when it moved by BPFPROF_MEMORY_STEP_BYTES or more since the last one sent. */
#define BPFPROF_MEMORY_STEP_BYTES (256 * 1024)
struct bpfprof_memory_event {
  struct bpfprof_event_header header;
  __u64 file_bytes;  /* MM_FILEPAGES: mapped file pages */
  __u64 anon_bytes;  /* MM_ANONPAGES */
  __u64 swap_bytes;  /* MM_SWAPENTS: swapped out (not resident) */
  __u64 shmem_bytes; /* MM_SHMEMPAGES */
};

struct bpfprof_comm_event {
  struct bpfprof_event_header header;
  char comm[BPFPROF_COMM_LEN];
};

/* record --allocations (BPFPROF_EVENT_ALLOCATION): sent just after the stack event
 * (BPFPROF_CONTEXT_ALLOCATION) of the call, with the same cpu, time and thread (or alone, when
 * the walk was interrupted). A block it allocated (`address`, the `bytes` asked for; 0 if none
 * was sampled) and a sampled block it freed (free's, or realloc's old one; 0 if none). */
struct bpfprof_allocation_event {
  struct bpfprof_event_header header;
  __u64 address;
  __u64 bytes;
  __u64 freed_address;
  __u64 freed_bytes;
};

/* record --memory (BPFPROF_EVENT_ADDRESS_SPACE): sent just after the stack event
 * (BPFPROF_CONTEXT_ADDRESS_SPACE) of a sampled system call that changed the address space,
 * with the same cpu, time and thread (or alone, when the walk was interrupted): where
 * (`address`: the mapping's start, the unmapped range's, the heap's end before a brk) and
 * by how much it grew (`change` > 0) or shrank. */
struct bpfprof_address_space_event {
  struct bpfprof_event_header header;
  __u64 address;
  __s64 change;
  __u32 call; /* enum bpfprof_address_space_call */
  __u32 reserved;
};

#endif
