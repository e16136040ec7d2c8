/* Helpers every program uses: whether a process is tracked, an event's header, the ring
 * buffers' wakeup flags, the count of events lost when a ring buffer is full, and a word of
 * user memory. */
#ifndef BPFPROF_HELPERS_H
#define BPFPROF_HELPERS_H

#include "vmlinux.h"

#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>

#include "bpf/events.h"
#include "bpf/knobs.h"
#include "bpf/maps.h"

/* task_struct.flags: a kernel thread (never in user mode). */
#define PF_KTHREAD_FLAG 0x00200000

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

/* The current task's thread id in its own pid namespace (what gettid() returns inside a
 * container, and what a runtime keeps as a thread's id), the host's outside one. */
static __always_inline __u32 current_namespace_tid(void) {
  struct task_struct* task = bpf_get_current_task_btf();
  struct pid* pid = BPF_CORE_READ(task, thread_pid);
  if (!pid) return 0;
  const __u32 level = BPF_CORE_READ(pid, level);
  int nr = 0;
  const char* numbers = (const char*)pid + bpf_core_field_offset(pid->numbers);
  if (bpf_probe_read_kernel(&nr, sizeof(nr),
                            numbers + (level & 31) * bpf_core_type_size(struct upid) +
                                bpf_core_field_offset(struct upid, nr)))
    return 0;
  return (__u32)nr;
}

/* The current thread's thread pointer: the FS base on x86-64 (thread.fsbase, set at clone and
 * by arch_prctl), which is pthread_self() for glibc and musl; 0 elsewhere. */
static __always_inline __u64 current_thread_pointer(void) {
#if defined(__TARGET_ARCH_x86)
  return bpf_get_current_task_btf()->thread.fsbase;
#else
  return 0;
#endif
}

/* A word of the current process's memory, 0 where it cannot be read (or at address 0): the
 * runtimes' readers follow pointers of memory the process may have written anything into. */
static __always_inline __u64 read_user_word(__u64 address) {
  __u64 value = 0;
  if (!address || bpf_probe_read_user(&value, sizeof(value), (void*)address)) return 0;
  return value;
}

/* For the task running now. */
static __always_inline void count_lost(void) { count_lost_for(bpf_get_current_pid_tgid() >> 32); }

static __always_inline __u64 submit_flags(void) {
  return bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) > wakeup_threshold ? BPF_RB_FORCE_WAKEUP
                                                                          : BPF_RB_NO_WAKEUP;
}

/* Sends `size` bytes of the event at `e` (built in scratch space), at most `max_size` (which
 * bounds it for the verifier), through the main ring buffer; when that is full, the loss is
 * counted for process `tgid`. */
static __always_inline void send_event(void* e, __u64 size, __u64 max_size, __u32 tgid) {
  if (size > max_size) size = max_size;
  if (bpf_ringbuf_output(&events, e, size, submit_flags())) count_lost_for(tgid);
}

/* A countdown of bytes to the next sampled call, for a mean of `period` bytes between two:
 * drawn from an exponential distribution, so that a byte is sampled with the same chance
 * wherever it lies (as tcmalloc and Go sample). */
static __always_inline __s64 next_byte_countdown(__u64 period) {
  const __u32 quantile =
      allocation_quantiles[bpf_get_prandom_u32() & (BPFPROF_ALLOCATION_QUANTILES - 1)];
  return (__s64)((period * quantile) >> 10) + 1;
}

static __always_inline __u64 lifecycle_submit_flags(void) {
  return bpf_ringbuf_query(&lifecycle_events, BPF_RB_AVAIL_DATA) > 256 * 1024 ? BPF_RB_FORCE_WAKEUP
                                                                              : BPF_RB_NO_WAKEUP;
}

/* A new process wakes the reader at most this often (last_new_process_wakeup_ns). */
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

#endif
