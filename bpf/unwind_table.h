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
 * In the kernel a table is stored compact (struct bpfprof_unwind_page and _entry below): a
 * row's rule (all but its pc) is one of a few thousand distinct ones on a whole machine, kept
 * once in a shared rule array; a row is its pc's low 16 bits and its rule's index, found
 * through the 64 KiB page of code its pc lies in.
 *
 * One frame step from the registers {pc, sp, bp, bx} of a frame, with the row of pc (for every
 * frame but the innermost and a signal-interrupted one, the row of pc - 1, the call site):
 *   CFA = (cfa_rule == RSP ? sp : RBP ? bp : bx) + cfa_offset (PLT: see below)
 *   return address = *(u64 *)(CFA - 8)
 *   caller's bp   = rbp_rule == AT_CFA ? *(u64 *)(CFA + rbp_offset) : bp
 *   caller's bx   = rbx_rule == AT_CFA ? *(u64 *)(CFA + rbx_offset) : bx
 *   caller's sp   = CFA
 * rbx is followed only for the rare frame whose CFA it gives (the dynamic loader's lazy
 * binding trampoline): a walk keeps where each frame's rbx is saved, and reads it only there.
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
  /* CFA = sp + cfa_offset, and the return address is in rdi: glibc's vfork pops it there
   * before its system call (the child must not overwrite it on the shared stack), so a
   * shell's every vfork leaves its parent blocked here. Only the innermost frame has its
   * registers; anywhere else the walk falls back. */
  BPFPROF_CFA_RSP_RETURN_IN_RDI = 6,
  /* CFA = rbx + cfa_offset: ld.so's _dl_runtime_resolve_* (lazy binding), which aligns rsp for
   * its register save area after keeping the frame in rbx, then calls _dl_fixup. */
  BPFPROF_CFA_RBX = 7,
  /* Go's asmcgocall just past its call of a C function (symbols/go/cgo_switches.h), on the
   * thread's system stack: the caller is on the goroutine's stack, whose sp is
   * g.stack.hi - [sp + rbx_offset] with g at [sp + rbx_offset + 8] (or [sp + rbx_offset]
   * itself where g is 0: called on the system stack already). CFA = that sp + cfa_offset. */
  BPFPROF_CFA_GO_CGO_CALL = 8,
  /* Go's cgocallback just past its call into Go, in a frame on the goroutine's stack: the
   * caller is on the system stack, where the frame's sp is g0.sched.sp (g from the thread
   * pointer + rbx_offset, then g.m, m.g0). CFA = that sp + cfa_offset. */
  BPFPROF_CFA_GO_CGO_CALLBACK = 9,
  /* Go's systemstack just past its call of the function it runs on the system stack: the
   * caller is on the goroutine's stack, whose sp is m.curg's sched.sp (g from the thread
   * pointer + rbx_offset, then g.m, then m.curg at go_m_curg_words * 8). CFA = that sp +
   * cfa_offset. */
  BPFPROF_CFA_GO_SYSTEMSTACK = 10,
  /* CFA = bp + cfa_offset, where sp may be on another stack: Go's callers of the vDSO keep rbp
   * at their frame's base on the goroutine's stack while they run the call on the system stack
   * (symbols/go/vdso_calls.h), so the caller's frame need not lie above sp. */
  BPFPROF_CFA_GO_FRAME_BASE = 11,
  BPFPROF_CFA_LAST_RULE = BPFPROF_CFA_GO_FRAME_BASE,
};

/* Fields of Go's runtime structures the two rules read (symbols/go/cgo_switches.h finds them
 * in the instructions before it gives a row). */
#define BPFPROF_GO_G_STACK_HI 0x08 /* g.stack.hi (g.stack.lo at 0) */
#define BPFPROF_GO_G_M 0x30        /* g.m */
#define BPFPROF_GO_M_G0 0x00       /* m.g0 */
#define BPFPROF_GO_G_SCHED_SP 0x38 /* g.sched.sp */

/* How the caller's rbp is found (and its rbx: rbx_rule). */
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
  __s16 rbx_offset;
  __u8 rbx_rule;        /* enum bpfprof_rbp_rule's values, for rbx */
  __u8 go_m_curg_words; /* BPFPROF_CFA_GO_SYSTEMSTACK only; else 0 */
};

/* A row without its pc: the fields of struct bpfprof_unwind_row from cfa_offset on, in the
 * same order (the kernel's shared rule array). */
struct bpfprof_unwind_rule {
  __s32 cfa_offset;
  __s16 rbp_offset;
  __u8 cfa_rule;
  __u8 rbp_rule;
  __s16 rbx_offset;
  __u8 rbx_rule;
  __u8 go_m_curg_words;
};

/* Rows are found through the page of code their pc lies in: 64 KiB of ELF addresses. */
#define BPFPROF_UNWIND_PAGE_BITS 16
#define BPFPROF_UNWIND_PAGE_MASK ((1u << BPFPROF_UNWIND_PAGE_BITS) - 1)

/* A compact row: where it starts in its page, and its rule's index in the rule array. Each
 * page whose first byte no row starts at begins with a row (pc_low 0) repeating the rule in
 * force there, so that a search never leaves its page. */
struct bpfprof_unwind_entry {
  __u16 pc_low;
  __u16 rule;
};

/* A page's rows: [first_row, first_row + row_count) of the row array (none: no rule). */
struct bpfprof_unwind_page {
  __u32 first_row;
  __u32 row_count;
};

/* Offsets from sp at __restore_rt (the handler's return popped pretcode, so sp points at the
 * ucontext): uc_mcontext starts 40 bytes in, then r8..r15, rdi, rsi, rbp, rbx, rdx, rax, rcx,
 * rsp, rip. */
#define BPFPROF_SIGFRAME_RBP (40 + 10 * 8)
#define BPFPROF_SIGFRAME_RBX (40 + 11 * 8)
#define BPFPROF_SIGFRAME_RCX (40 + 14 * 8)
#define BPFPROF_SIGFRAME_RSP (40 + 15 * 8)
#define BPFPROF_SIGFRAME_RIP (40 + 16 * 8)

/* Whether the 8 bytes before a return address end with a call instruction: call rel32 (e8),
 * or call through a register or memory (ff /2: 2, 3 or 6 bytes, any REX prefix before it). */
static inline int bpfprof_follows_call(const unsigned char* code) {
  if (code[3] == 0xe8) return 1;
  if (code[6] == 0xff && (code[7] & 0xf8) == 0xd0) return 1;                             /* *%reg */
  if (code[5] == 0xff && (code[6] & 0x38) == 0x10 && (code[6] & 0xc0) == 0x40) return 1; /* d8 */
  if (code[2] == 0xff && (code[3] & 0x38) == 0x10 &&
      ((code[3] & 0xc7) == 0x05 || (code[3] & 0xc0) == 0x80))
    return 1; /* disp32(%rip), disp32(%reg) */
  return 0;
}

/* glibc's clone and clone3 end their CFI before the syscall, for the child's sake: the child
 * starts just past it, at `test %rax,%rax; jl <error>; je <thread start>; ret`, on a new stack
 * that holds no caller, and runs those three instructions before the thread start's CFI
 * begins. A thread at one of them with rax 0 is in its outermost frame (the parent, rax its
 * child's tid, returns to its caller). `code`: the 10 bytes from 2 before the entry, where
 * the syscall instruction is. */
#define BPFPROF_CLONE_CODE_BYTES 10
static inline int bpfprof_is_clone_child_entry(const unsigned char* code) {
  return code[0] == 0x0f && code[1] == 0x05 && code[2] == 0x48 && code[3] == 0x85 &&
         code[4] == 0xc0 && code[5] == 0x7c && code[7] == 0x74 && code[9] == 0xc3;
}

/* Whether a pc is at one of the child's three instructions (the entry, +3, +5). `window`: the
 * BPFPROF_CLONE_WINDOW_BYTES bytes from pc - BPFPROF_CLONE_WINDOW_BEFORE. */
#define BPFPROF_CLONE_WINDOW_BEFORE 7
#define BPFPROF_CLONE_WINDOW_BYTES 15
static inline int bpfprof_in_clone_child_start(const unsigned char* window) {
  return bpfprof_is_clone_child_entry(window + 5) || bpfprof_is_clone_child_entry(window + 2) ||
         bpfprof_is_clone_child_entry(window);
}

#endif
