/* Stack copies: the current task's user registers and a copy of its user stack from sp,
 * unwound in userspace with the files' call-frame information (--call-graph dwarf-copy, and
 * the in-kernel walk's fallback), and its kernel stack with them. */
#ifndef BPFPROF_STACK_COPY_H
#define BPFPROF_STACK_COPY_H

#include "vmlinux.h"

#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>

#include "bpf/events.h"
#include "bpf/knobs.h"
#include "bpf/maps.h"
#include "bpf/stack_capture_fp.h"
#include "bpf/user_regs.h"

struct stack_end {
  __u64 end;
};

static long find_stack_end(struct task_struct* task, struct vm_area_struct* vma, void* data) {
  ((struct stack_end*)data)->end = vma->vm_end;
  return 0;
}

/* The current task's saved user registers (also when it is in the kernel), in DWARF order;
 * `r` stays as it is (zeroed by the caller) for a task without a user context. */
static __always_inline void read_user_registers(struct task_struct* task, __u64* r) {
  /* Read, not loaded: the verifier looks each load of a pointer member from a trusted pointer
   * up in the kernel's BTF by name, a scan of all its types, at every state it reaches. */
  if (!BPF_CORE_READ(task, mm)) return;
  struct pt_regs* regs = (struct pt_regs*)bpf_task_pt_regs(task);
  if (!regs) return;
  /* Direct loads (a BTF pointer): cheaper than a helper call per register. */
  r[0] = regs->ax;
  r[1] = regs->dx;
  r[2] = regs->cx;
  r[3] = regs->bx;
  r[4] = regs->si;
  r[5] = regs->di;
  r[6] = regs->bp;
  r[7] = regs->sp;
  r[8] = regs->r8;
  r[9] = regs->r9;
  r[10] = regs->r10;
  r[11] = regs->r11;
  r[12] = regs->r12;
  r[13] = regs->r13;
  r[14] = regs->r14;
  r[15] = regs->r15;
  r[16] = user_pc(regs);
}

#define PAGE_BYTES 4096

/* What a page's copy reads lives in the event (a map value, whose contents the verifier
 * does not track), not on the stack: so bpf_loop's callback is verified in a few passes. */
struct stack_copy {
  struct bpfprof_copy_event* event;
};

/* Page `index` of the copy: from sp to the first page boundary, then whole pages. */
static long copy_stack_page(__u64 index, void* context) {
  struct bpfprof_copy_event* e = ((struct stack_copy*)context)->event;
  const __u64 sp = e->user_regs[BPFPROF_REG_SP];
  const __u64 wanted = e->stack_bytes_wanted;
  const __u64 first = PAGE_BYTES - (sp & (PAGE_BYTES - 1));
  __u64 offset = index == 0 ? 0 : first + (index - 1) * PAGE_BYTES;
  if (offset >= wanted) return 1;
  __u64 chunk = index == 0 ? first : PAGE_BYTES;
  if (chunk > wanted - offset) chunk = wanted - offset;
  if (offset > BPFPROF_MAX_STACK_COPY || chunk > PAGE_BYTES || chunk == 0) return 1;
  /* On failure the helper zeroes the destination. */
  if (bpf_probe_read_user(e->stack + offset, chunk, (void*)(sp + offset)) == 0)
    e->stack_size = offset + chunk;
  else
    e->head.flags |= BPFPROF_STACK_COPY_UNREADABLE;
  return 0;
}

/* A forked child runs its parent's code until it execs: it copies as much of its stack. */
static __always_inline void inherit_stack_copy_size(__u32 parent_tgid, __u32 child_tgid) {
  __u32* raised = bpf_map_lookup_elem(&stack_copy_bytes_by_process, &parent_tgid);
  if (raised) bpf_map_update_elem(&stack_copy_bytes_by_process, &child_tgid, raised, BPF_ANY);
}

/* An exec starts another program: the size learnt for its file, else the configured one. */
static __always_inline void stack_copy_size_at_exec(__u32 tgid, struct file* file) {
  struct bpfprof_file_key key = {.dev = BPF_CORE_READ(file, f_inode, i_sb, s_dev),
                                 .inode = BPF_CORE_READ(file, f_inode, i_ino)};
  __u32* learnt = bpf_map_lookup_elem(&stack_copy_bytes_by_file, &key);
  if (learnt)
    bpf_map_update_elem(&stack_copy_bytes_by_process, &tgid, learnt, BPF_ANY);
  else
    bpf_map_delete_elem(&stack_copy_bytes_by_process, &tgid);
}

/* Copies the user stack from sp, page by page, up to the end of its mapping, at most
 * user_stack_copy_bytes (or the process's raised size). A page that cannot be read without a
 * fault (never touched: the middle of a large local array, or past the end of the mapping
 * when its lock was busy and the end is unknown) is left zeroed and the copy goes on: the
 * frames above it are still there. The copy ends after the last page that was read. */
static __always_inline void copy_user_stack(struct task_struct* task,
                                            struct bpfprof_copy_event* e) {
  const __u64 sp = e->user_regs[BPFPROF_REG_SP];
  __u64 limit = user_stack_copy_bytes;
  __u32 tgid = e->head.header.pid;
  __u32* raised = bpf_map_lookup_elem(&stack_copy_bytes_by_process, &tgid);
  if (raised) limit = *raised;
  bool end_known = false;
  struct stack_end found = {0};
  if (bpf_find_vma(task, sp, find_stack_end, &found, 0) == 0 && found.end > sp) end_known = true;
  /* With the kernel walk, a copy is the rare fallback (a process's first milliseconds, code
   * without a table): it takes the whole stack, which is only as deep as it has been, so that
   * a young process's deep frames (python's 16 KB path buffers) are not cut at the limit. */
  /* Its end may be unknown because the walk used the one VMA lookup of the sampling
   * interrupt (mapping_from_vma): then the pages past it fail to read and are not sent. */
  if (fallback_copies_whole_stack) limit = BPFPROF_MAX_STACK_COPY;
  if (limit > BPFPROF_MAX_STACK_COPY) limit = BPFPROF_MAX_STACK_COPY;
  e->stack_copy_limit = limit;
  e->stack_bytes_wanted = limit;
  if (end_known) {
    if (found.end - sp <= limit)
      e->stack_bytes_wanted = found.end - sp;
    else
      e->head.flags |= BPFPROF_STACK_COPY_AT_LIMIT;
  }
  e->stack_size = 0;
  struct stack_copy c = {.event = e};
  bpf_loop(BPFPROF_MAX_STACK_COPY / PAGE_BYTES + 2, copy_stack_page, &c, 0);
  if (!end_known && e->stack_size >= limit) e->head.flags |= BPFPROF_STACK_COPY_AT_LIMIT;
}

/* The current task's user registers and stack copy, for unwinding with CFI in userspace; and
 * its kernel stack. */
static __always_inline void capture_copy(void* ctx, struct bpfprof_copy_event* e, bool with_user,
                                         bool with_kernel) {
  struct task_struct* task = bpf_get_current_task_btf();
  e->stack_size = 0;
  e->stack_copy_limit = 0;
  e->stack_bytes_wanted = 0;
  for (int i = 0; i < BPFPROF_USER_REGS; i++) e->user_regs[i] = 0;
  if (with_user) read_user_registers(task, e->user_regs);
  e->head.kernel_depth =
      with_kernel ? capture_kernel_stack(ctx, e->kernel_ips, BPFPROF_MAX_STACK_DEPTH) & 0x7f : 0;
  if (e->user_regs[BPFPROF_REG_SP]) copy_user_stack(task, e);
}

#endif
