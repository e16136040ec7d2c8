/* A thread's user pc as its saved registers describe it, also in the few instructions of
 * rt_sigreturn where the kernel has restored every register of the interrupted context but
 * the pc (restore_sigcontext stores sp, then ip): there the registers are the interrupted
 * frame's and the pc still __restore_rt's, a state no unwinder can follow (~1 in 1,000 of a
 * signal storm's samples in rt_sigreturn were cut so). The interrupted pc is then read from
 * the signal frame the kernel is restoring from, below the restored sp. */
#ifndef BPFPROF_USER_REGS_H
#define BPFPROF_USER_REGS_H

#include "vmlinux.h"

#include <bpf/bpf_helpers.h>

#include "bpf/unwind_table.h"

#define BPFPROF_NR_RT_SIGRETURN 15 /* x86-64 */

/* The signal frame lies below the interrupted sp: the 128-byte red zone, the saved FPU state
 * (~0.8 KB with AVX, ~2.7 KB with AVX-512) and the frame. Its ucontext starts 16-aligned. */
#define SIGFRAME_SEARCH_STEP 16
#define SIGFRAME_SEARCH_STEPS 512

/* The saved mcontext from rbp to rip (rbp, rbx, rdx, rax, rcx, rsp, rip), read at once. */
#define SIGFRAME_WORD(offset) (((offset)-BPFPROF_SIGFRAME_RBP) / 8)
#define SIGFRAME_WORDS (SIGFRAME_WORD(BPFPROF_SIGFRAME_RIP) + 1)

struct sigframe_search {
  __u64 top; /* the highest address the ucontext can start at */
  __u64 bp, cx, sp;
  __u64 pc; /* the saved pc, once found */
};

static long sigframe_search_step(__u64 i, void* ctx) {
  struct sigframe_search* s = ctx;
  __u64 words[SIGFRAME_WORDS];
  const __u64 at = s->top - i * SIGFRAME_SEARCH_STEP;
  if (bpf_probe_read_user(words, sizeof(words), (void*)(at + BPFPROF_SIGFRAME_RBP))) return 1;
  if (words[SIGFRAME_WORD(BPFPROF_SIGFRAME_RBP)] != s->bp ||
      words[SIGFRAME_WORD(BPFPROF_SIGFRAME_RCX)] != s->cx ||
      words[SIGFRAME_WORD(BPFPROF_SIGFRAME_RSP)] != s->sp)
    return 0;
  s->pc = words[SIGFRAME_WORD(BPFPROF_SIGFRAME_RIP)];
  return 1;
}

/* The user pc to unwind from. In a system call, the entry saved the pc in cx too (the syscall
 * instruction puts it there); in rt_sigreturn a cx that differs from ip has been restored
 * already, and so has sp. */
static __always_inline __u64 user_pc(struct pt_regs* regs) {
  const __u64 ip = regs->ip; /* BTF loads (bpf_task_pt_regs): no helper */
  const __u64 cx = regs->cx;
  if (regs->orig_ax != BPFPROF_NR_RT_SIGRETURN || cx == ip) return ip;
  const __u64 sp = regs->sp;
  __u64 saved_cx;
  if (!bpf_probe_read_user(&saved_cx, sizeof(saved_cx), (void*)(sp + BPFPROF_SIGFRAME_RCX)) &&
      saved_cx == cx)
    return ip; /* sp is still the signal frame's */
  struct sigframe_search s = {
      .top = (sp - 128 - BPFPROF_SIGFRAME_RIP - 8) & ~15ull, .bp = regs->bp, .cx = cx, .sp = sp};
  bpf_loop(SIGFRAME_SEARCH_STEPS, sigframe_search_step, &s, 0);
  return s.pc ? s.pc : ip;
}

#endif
