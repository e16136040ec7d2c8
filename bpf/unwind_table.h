/* Compact unwind tables for the in-kernel unwinder (x86-64), shared by the BPF programs and
 * userspace (symbols/dwarf/unwind_table builds them, capture/ loads them into BPF maps).
 * Plain C, fixed-size fields only.
 *
 * A file's table is a sorted run of rows. A row holds from its `pc` up to the next row's `pc`
 * (the last row of a file ends the table's coverage: userspace closes every FDE with a row of
 * rule BPFPROF_CFA_UNKNOWN where the next FDE does not start at once). `pc` is the ELF virtual
 * address in the file (what .eh_frame speaks); a process mapping carries the `bias` that turns
 * a runtime address into it: elf_vaddr = address - bias.
 *
 * One frame step from the registers {pc, sp, bp} of a frame, with the row of pc (for every
 * frame but the innermost and a signal-interrupted one, the row of pc - 1, the call site):
 *   CFA = (cfa_rule == RSP ? sp : bp) + cfa_offset            (PLT: see below)
 *   return address = *(u64 *)(CFA - 8)
 *   caller's bp   = rbp_rule == AT_CFA ? *(u64 *)(CFA + rbp_offset) : bp
 *   caller's sp   = CFA
 */
#ifndef BPFPROF_UNWIND_TABLE_H
#define BPFPROF_UNWIND_TABLE_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

/* How the canonical frame address (the caller's sp) is found. */
enum bpfprof_cfa_rule {
  /* No rule that the BPF walk can follow covers this address (no FDE, or a DWARF expression
   * it does not know): the walk stops and the sample falls back to a stack copy. */
  BPFPROF_CFA_UNKNOWN = 0,
  BPFPROF_CFA_RSP = 1, /* CFA = sp + cfa_offset */
  BPFPROF_CFA_RBP = 2, /* CFA = bp + cfa_offset */
  /* The expression of PLT entries (16-byte slots):
   * CFA = sp + cfa_offset + ((pc & 15) >= 11 ? 8 : 0). */
  BPFPROF_CFA_PLT = 3,
  /* The return address is undefined here: the outermost frame of a thread (_start, clone).
   * The stack is complete. */
  BPFPROF_CFA_ROOT = 4,
  /* A signal trampoline (__restore_rt, an FDE with the 'S' augmentation): sp points at the
   * kernel's ucontext; the interrupted frame's registers are read from its uc_mcontext
   * (see BPFPROF_SIGFRAME_*), and that frame's pc is exact (not a return address). */
  BPFPROF_CFA_SIGNAL = 5,
};

/* How the caller's rbp is found. */
enum bpfprof_rbp_rule {
  BPFPROF_RBP_SAME = 0,   /* unchanged (not saved by this frame yet) */
  BPFPROF_RBP_AT_CFA = 1, /* saved at CFA + rbp_offset */
  /* Any other rule (a register copy, an expression): the walk may go on while no later
   * frame needs rbp; userspace marks these rows so rather than guessing. */
  BPFPROF_RBP_UNKNOWN = 2,
};

struct bpfprof_unwind_row {
  __u32 pc; /* ELF virtual address where the row starts */
  __s32 cfa_offset;
  __s16 rbp_offset;
  __u8 cfa_rule; /* enum bpfprof_cfa_rule */
  __u8 rbp_rule; /* enum bpfprof_rbp_rule */
};

/* Offsets from sp at __restore_rt (the handler's return popped pretcode, so sp points at the
 * ucontext): uc_mcontext starts 40 bytes in, then r8..r15, rdi, rsi, rbp, rbx, rdx, rax, rcx,
 * rsp, rip. */
#define BPFPROF_SIGFRAME_RBP (40 + 10 * 8)
#define BPFPROF_SIGFRAME_RCX (40 + 14 * 8)
#define BPFPROF_SIGFRAME_RSP (40 + 15 * 8)
#define BPFPROF_SIGFRAME_RIP (40 + 16 * 8)

#endif
