/* record --memory: where tracked processes' address spaces grow and shrink. The system calls
 * that do it (mmap, munmap, brk, mremap) are sampled by bytes: each thread counts down the
 * bytes its calls mapped or unmapped, and the call that ends its countdown sends the caller's
 * stacks and what it did. The entry of each call notes its arguments; its exit, once the
 * kernel has said whether it worked, counts and samples (a walker program: an object of its
 * own). Both are BTF tracepoints of every system call (sys_enter, sys_exit), which look at the
 * call's number first: the per-call tracepoints (syscalls:sys_enter_mmap) are found only
 * through tracefs, which a freshly booted machine may not have mounted, and any system-call
 * tracepoint in use sends every call through the slow entry and exit paths alike. */
#ifndef BPFPROF_ADDRESS_SPACE_PROBES_H
#define BPFPROF_ADDRESS_SPACE_PROBES_H

#include "vmlinux.h"

#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "bpf/events.h"
#include "bpf/helpers.h"
#include "bpf/knobs.h"
#include "bpf/maps.h"
#include "bpf/stack_events.h"
#include "bpf/tp_btf.h"

#define BPFPROF_PAGE_BYTES 4096ull
#define BPFPROF_MAX_ERRNO 4095

static __always_inline __u64 page_aligned(__u64 bytes) {
  return (bytes + BPFPROF_PAGE_BYTES - 1) & ~(BPFPROF_PAGE_BYTES - 1);
}

/* The calls followed, by their x86-64 numbers (0: any other). */
static __always_inline __u32 address_space_call_of(long number) {
  switch (number) {
    case 9:
      return BPFPROF_ADDRESS_SPACE_MMAP;
    case 11:
      return BPFPROF_ADDRESS_SPACE_MUNMAP;
    case 12:
      return BPFPROF_ADDRESS_SPACE_BRK;
    case 25:
      return BPFPROF_ADDRESS_SPACE_MREMAP;
  }
  return 0;
}

/* The entry of mmap, munmap, brk and mremap: the arguments, from the saved user registers. */
SEC(TP_BTF("sys_enter"))
int BPF_PROG(on_address_space_entry, struct pt_regs* entry_regs, long number) {
  const __u32 call = address_space_call_of(number);
  if (!call) return 0;
  const __u32 tgid = bpf_get_current_pid_tgid() >> 32;
  if (tracked_state(tgid) != BPFPROF_TRACKED) return 0;
  struct task_struct* current = bpf_get_current_task_btf();
  struct address_space_call* t =
      bpf_task_storage_get(&address_space_calls, current, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
  if (!t) return 0;
  if (!t->countdown) t->countdown = next_byte_countdown(BPFPROF_ADDRESS_SPACE_PERIOD);
  const struct pt_regs* regs = (const struct pt_regs*)bpf_task_pt_regs(current);
  t->call = call;
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

/* The exit of mmap, munmap, brk and mremap. System-call tracepoints may run preemptible: the
 * walk goes in the tracepoints' slot, as the allocator's uprobes' do
 * (bpf/allocator_probes.h). */
SEC(TP_BTF("sys_exit"))
int BPF_PROG(on_address_space_exit, struct pt_regs* exit_regs, long ret) {
  if (!address_space_call_of(exit_regs->orig_ax)) return 0;
  const __u32 tgid = bpf_get_current_pid_tgid() >> 32;
  if (tracked_state(tgid) != BPFPROF_TRACKED) return 0;
  struct task_struct* current = bpf_get_current_task_btf();
  struct address_space_call* t = bpf_task_storage_get(&address_space_calls, current, 0, 0);
  if (!t || !t->call) return 0;
  struct bpfprof_address_space_event e = {.call = t->call};
  e.change = address_space_change(t, ret, &e.address);
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
