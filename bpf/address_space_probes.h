/* record --memory: where tracked processes' address spaces grow and shrink. The system calls
 * that do it (mmap, munmap, brk, mremap) are sampled by bytes: each thread counts down the
 * bytes its calls mapped or unmapped, and the call that ends its countdown sends the caller's
 * stacks and what it did. The entry of each call notes its arguments (one program, the attach
 * cookie says which call); its exit, once the kernel has said whether it worked, counts and
 * samples (a walker program: an object of its own). */
#ifndef BPFPROF_ADDRESS_SPACE_PROBES_H
#define BPFPROF_ADDRESS_SPACE_PROBES_H

#include "vmlinux.h"

#include <bpf/bpf_helpers.h>

#include "bpf/events.h"
#include "bpf/helpers.h"
#include "bpf/knobs.h"
#include "bpf/maps.h"
#include "bpf/stack_events.h"

#define BPFPROF_PAGE_BYTES 4096ull
#define BPFPROF_MAX_ERRNO 4095

static __always_inline __u64 page_aligned(__u64 bytes) {
  return (bytes + BPFPROF_PAGE_BYTES - 1) & ~(BPFPROF_PAGE_BYTES - 1);
}

/* sys_enter_mmap, _munmap, _brk and _mremap (the attach cookie says which). The arguments are
 * read from the saved user registers, not the tracepoint's record: a program attached to a
 * tracepoint may read no further into its record than the shortest one's end (brk's). */
SEC("tracepoint")
int on_address_space_entry(void* ctx) {
  const __u32 tgid = bpf_get_current_pid_tgid() >> 32;
  if (tracked_state(tgid) != BPFPROF_TRACKED) return 0;
  struct task_struct* current = bpf_get_current_task_btf();
  struct address_space_call* t =
      bpf_task_storage_get(&address_space_calls, current, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
  if (!t) return 0;
  if (!t->countdown) t->countdown = next_byte_countdown(BPFPROF_ADDRESS_SPACE_PERIOD);
  const struct pt_regs* regs = (const struct pt_regs*)bpf_task_pt_regs(current);
  t->call = (__u32)bpf_get_attach_cookie(ctx);
  t->address = regs->di; /* the first argument; BTF loads: no helper */
  t->length = regs->si;
  if (t->call == BPFPROF_ADDRESS_SPACE_MREMAP) {
    t->old_length = regs->si;
    t->length = regs->dx;
  } else if (t->call == BPFPROF_ADDRESS_SPACE_BRK) {
    struct mm_struct* mm = current->mm;
    t->address = mm ? mm->brk : 0;
  }
  return 0;
}

/* How much the call in `t` grew the address space (< 0: shrank), now that it returned `ret`;
 * where, in *address. */
static __always_inline __s64 address_space_change(const struct address_space_call* t, long ret,
                                                  __u64* address) {
  const bool failed = ret < 0 && ret >= -BPFPROF_MAX_ERRNO;
  *address = t->address;
  switch (t->call) {
    case BPFPROF_ADDRESS_SPACE_MMAP:
      *address = (__u64)ret;
      return failed ? 0 : (__s64)page_aligned(t->length);
    case BPFPROF_ADDRESS_SPACE_MUNMAP:
      return ret ? 0 : -(__s64)page_aligned(t->length);
    case BPFPROF_ADDRESS_SPACE_BRK: /* brk returns the heap's end, moved or not */
      return (__s64)(page_aligned((__u64)ret) - page_aligned(t->address));
    case BPFPROF_ADDRESS_SPACE_MREMAP:
      if (failed) return 0;
      *address = (__u64)ret;
      return (__s64)page_aligned(t->length) - (__s64)page_aligned(t->old_length);
  }
  return 0;
}

/* sys_exit_mmap, _munmap, _brk and _mremap. Syscall tracepoints may run preemptible: the walk
 * goes in the tracepoints' slot, as the allocator's uprobes' do (bpf/allocator_probes.h). */
SEC("tracepoint")
int on_address_space_exit(struct trace_event_raw_sys_exit* ctx) {
  const __u32 tgid = bpf_get_current_pid_tgid() >> 32;
  if (tracked_state(tgid) != BPFPROF_TRACKED) return 0;
  struct task_struct* current = bpf_get_current_task_btf();
  struct address_space_call* t = bpf_task_storage_get(&address_space_calls, current, 0, 0);
  if (!t || !t->call) return 0;
  struct bpfprof_address_space_event e = {.call = t->call};
  e.change = address_space_change(t, ctx->ret, &e.address);
  t->call = 0;
  if (!e.change) return 0;
  t->countdown -= e.change > 0 ? e.change : -e.change;
  if (t->countdown > 0) return 0;
  t->countdown = next_byte_countdown(BPFPROF_ADDRESS_SPACE_PERIOD);
  send_sampled_call(ctx, &e, sizeof(e), BPFPROF_CONTEXT_ADDRESS_SPACE, BPFPROF_EVENT_ADDRESS_SPACE,
                    tgid);
  return 0;
}

#endif
