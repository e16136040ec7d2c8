/* The BPF programs' settings. Userspace writes them before load (bpf_programs.cpp); they live
 * in .rodata, so the verifier sees them as constants and leaves out the code of the modes
 * not in force. */
#ifndef BPFPROF_KNOBS_H
#define BPFPROF_KNOBS_H

#include "vmlinux.h"

#include "bpf/events.h"

/* 1 samples every process (system-wide mode). */
const volatile __u32 track_all = 0;
/* record --cgroup: how many cgroup_filters are in use; a process that execs inside one of
 * them is tracked from its exec on (those inside already are tracked by userspace). */
const volatile __u32 cgroup_filter_count = 0;
/* bpfprof's own process, never sampled (system-wide, its own samples would be events it has
 * to read, unwind and write: a feedback loop at high rates). */
const volatile __u32 self_tgid = 0;

/* 1 records the stacks of threads leaving the CPU and when they return. */
const volatile __u32 record_off_cpu = 0;
/* 1 records who wakes tracked threads, and from where (sched_waking). */
const volatile __u32 record_wakers = 0;
/* record --memory: 1 sends each tracked process's resident memory as it changes (rss_stat). */
const volatile __u32 record_memory = 0;
/* record --allocations: the mean bytes allocated between two sampled allocator calls, and
 * the countdowns' quantiles (BPFPROF_ALLOCATION_QUANTILES, in 1/1024ths of it). */
const volatile __u64 allocation_period = 512 * 1024;
const volatile __u32 allocation_quantiles[BPFPROF_ALLOCATION_QUANTILES] = {1024};
/* The sampling interval; a thread's off-CPU stack is taken at most once per interval (and a
 * waker's stack once per (waker, wakee) pair). */
const volatile __u64 off_cpu_stack_interval_ns = 1000000;

/* 0 for frame-pointer user stacks; else the most user-stack bytes to copy per sample for
 * unwinding in userspace (DWARF CFI). */
const volatile __u32 user_stack_copy_bytes = 0;
/* With user_stack_copy_bytes: 1 walks user stacks in the kernel with the unwind tables
 * first, and copies the stack only when the walk cannot reach a root. */
const volatile __u32 kernel_unwind = 0;
/* With kernel_unwind unless a copy size was given: copies take the whole stack where its end
 * is known (see copy_user_stack). */
const volatile __u32 fallback_copies_whole_stack = 0;

/* Waking the reader for every event would interrupt the profiled threads with IPIs at the
 * sampling rate; userspace polls on a timer instead, and is woken only when the buffer gets
 * fuller than this: a quarter of the ring buffer's size. */
const volatile __u64 wakeup_threshold = 4 * 1024 * 1024;

#endif
