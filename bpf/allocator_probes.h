/* record --allocations: the C allocator's calls in tracked processes, sampled by bytes. Uprobes
 * on malloc, calloc and realloc's entries count each thread's bytes down; a call that ends its
 * countdown is sampled at its return (a uretprobe, where the block's address is known), and a
 * sampled block is remembered until free (or realloc) gives it back. Both ends send an
 * allocation event and the caller's stacks. C++'s operator new and most runtimes' native
 * allocations go through malloc. */
#ifndef BPFPROF_ALLOCATOR_PROBES_H
#define BPFPROF_ALLOCATOR_PROBES_H

#include "vmlinux.h"

#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "bpf/events.h"
#include "bpf/helpers.h"
#include "bpf/knobs.h"
#include "bpf/maps.h"
#include "bpf/stack_events.h"

static __always_inline __u64 bytes_requested(struct pt_regs* ctx, __u64 call) {
  if (call == BPFPROF_ALLOCATOR_CALLOC) return PT_REGS_PARM1(ctx) * PT_REGS_PARM2(ctx);
  if (call == BPFPROF_ALLOCATOR_REALLOC || call == BPFPROF_ALLOCATOR_MEMALIGN)
    return PT_REGS_PARM2(ctx);
  if (call == BPFPROF_ALLOCATOR_POSIX_MEMALIGN) return PT_REGS_PARM3(ctx);
  return PT_REGS_PARM1(ctx);
}

static __always_inline struct allocating_thread* allocating_thread_of(__u32 tid) {
  struct allocating_thread* t = bpf_map_lookup_elem(&allocating_threads, &tid);
  if (t) return t;
  struct allocating_thread fresh = {.countdown = next_byte_countdown(allocation_period)};
  bpf_map_update_elem(&allocating_threads, &tid, &fresh, BPF_NOEXIST);
  return bpf_map_lookup_elem(&allocating_threads, &tid);
}

/* malloc, calloc, realloc, memalign (aligned_alloc) and posix_memalign's entry (the attach
 * cookie says which): no stack here. */
SEC("uprobe")
int on_allocator_entry(struct pt_regs* ctx) {
  const __u64 id = bpf_get_current_pid_tgid();
  const __u32 tgid = id >> 32;
  if (tracked_state(tgid) != BPFPROF_TRACKED) return 0;
  const __u64 call = bpf_get_attach_cookie(ctx);
  struct allocating_thread* t = allocating_thread_of((__u32)id);
  if (!t || t->in_call) return 0;
  t->in_call = 1;
  t->bytes = 0;
  t->freed_address = 0;
  t->block_at = call == BPFPROF_ALLOCATOR_POSIX_MEMALIGN ? PT_REGS_PARM1(ctx) : 0;
  if (call == BPFPROF_ALLOCATOR_REALLOC) {
    struct sampled_block old = {.tgid = tgid, .address = PT_REGS_PARM1(ctx)};
    const __u64* bytes = old.address ? bpf_map_lookup_elem(&sampled_blocks, &old) : NULL;
    if (bytes) {
      t->freed_address = old.address;
      t->freed_bytes = *bytes;
    }
  }
  const __u64 bytes = bytes_requested(ctx, call);
  t->countdown -= (__s64)bytes;
  if (t->countdown > 0) return 0;
  t->countdown = next_byte_countdown(allocation_period);
  t->bytes = bytes ? bytes : 1;
  return 0;
}

/* What a sampled call did: false when nothing sampled was allocated or freed. */
static __always_inline bool allocation_done(struct pt_regs* ctx, __u64 call, __u32 tgid, __u32 tid,
                                            struct bpfprof_allocation_event* e) {
  if (call == BPFPROF_ALLOCATOR_FREE) {
    struct sampled_block block = {.tgid = tgid, .address = PT_REGS_PARM1(ctx)};
    const __u64* bytes = block.address ? bpf_map_lookup_elem(&sampled_blocks, &block) : NULL;
    if (!bytes) return false;
    e->freed_address = block.address;
    e->freed_bytes = *bytes;
    bpf_map_delete_elem(&sampled_blocks, &block);
    return true;
  }
  struct allocating_thread* t = bpf_map_lookup_elem(&allocating_threads, &tid);
  if (!t) return false;
  t->in_call = 0; /* the innermost return: an outer call's finds nothing left to do */
  if (!t->bytes && !t->freed_address) return false;
  __u64 address = PT_REGS_RC(ctx);
  if (call == BPFPROF_ALLOCATOR_POSIX_MEMALIGN) { /* an int: 0 when the block was stored */
    const __u64 stored_at = (int)address ? 0 : t->block_at;
    if (!stored_at || bpf_probe_read_user(&address, sizeof(address), (void*)stored_at)) address = 0;
  }
  if (address && t->freed_address) { /* realloc gave its old block back */
    struct sampled_block old = {.tgid = tgid, .address = t->freed_address};
    bpf_map_delete_elem(&sampled_blocks, &old);
    e->freed_address = t->freed_address;
    e->freed_bytes = t->freed_bytes;
  }
  struct sampled_block block = {.tgid = tgid, .address = address};
  if (address && t->bytes && !bpf_map_update_elem(&sampled_blocks, &block, &t->bytes, BPF_ANY)) {
    e->address = address;
    e->bytes = t->bytes;
  }
  t->bytes = 0;
  t->freed_address = 0;
  return e->address || e->freed_address;
}

/* malloc, calloc and realloc's return, and free's entry (the attach cookie says which): a
 * sampled call's caller's stacks and event (a walker program: an object of its own). Uprobe
 * programs run preemptible with interrupts on: in the tracepoints' slot, which the samples
 * that interrupt them (1 in 500 walks, in the sampling program's slot, lost it their stack)
 * leave alone; send_stack finds out when a switch or a waking took it during the walk. */
SEC("uprobe")
int on_allocator_call(struct pt_regs* ctx) {
  const __u64 id = bpf_get_current_pid_tgid();
  const __u32 tgid = id >> 32;
  if (tracked_state(tgid) != BPFPROF_TRACKED) return 0;
  struct bpfprof_allocation_event e = {0};
  if (!allocation_done(ctx, bpf_get_attach_cookie(ctx), tgid, (__u32)id, &e)) return 0;
  send_sampled_call(ctx, &e, sizeof(e), BPFPROF_CONTEXT_ALLOCATION, BPFPROF_EVENT_ALLOCATION, tgid);
  return 0;
}

#endif
