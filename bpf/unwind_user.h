/* The in-kernel user-stack walker: from a thread's saved user registers, frame by
 * frame, with the compact unwind tables userspace loaded for the files the process maps
 * (bpf/unwind_table.h, bpf/unwind_maps.h). A walk that reaches a thread root yields the list
 * of return addresses; anything it cannot follow (a table not loaded yet, a row no rule
 * covers, a stack page not present) makes the caller fall back to a stack copy, unwound in
 * userspace. Its maps and their values (the walk's state, the row cache) are in bpf/maps.h. */
#ifndef BPFPROF_UNWIND_USER_H
#define BPFPROF_UNWIND_USER_H

#include "vmlinux.h"

#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>

#include "bpf/events.h"
#include "bpf/maps.h"
#include "bpf/unwind_maps.h"
#include "bpf/unwind_table.h"
#include "bpf/user_regs.h"

/* How far below the word asked for a window starts: a frame's saved rbp lies below its
 * return address, read first. */
#define STACK_WINDOW_BELOW 64

/* WALK_CUT: BPFPROF_MAX_UNWOUND_FRAMES frames walked without reaching a root. */
enum walk_result { WALK_GOING = 0, WALK_ROOT = 1, WALK_FALLBACK = 2, WALK_CUT = 3 };

struct unwind_context {
  struct unwind_walk* walk;
  struct bpfprof_frames_event* event;
  struct bpfprof_process_mappings* mappings;     /* NULL: not in the kernel yet */
  __u32 slot;                                    /* SAMPLE_SLOT or TRACEPOINT_SLOT */
  __u32 cpu;                                     /* its part of the row cache */
  const struct bpfprof_hotspot_process* hotspot; /* NULL: not a JVM (known yet) */
};

static __always_inline __u64 row_cache_key(const struct unwind_walk* w) {
  return w->pc | ((__u64)(w->exact & 1) << 63);
}

_Static_assert(BPFPROF_ROW_CACHE_CPU_ENTRIES == 2 << ROW_CACHE_BITS, "a slot per program");

static __always_inline struct row_cache_entry* row_cache_entry_for(const struct unwind_context* c,
                                                                   __u64 key) {
  __u32 index = (__u32)((key * 0x9E3779B97F4A7C15ull) >> (64 - ROW_CACHE_BITS));
  index |= (c->slot & 1) << ROW_CACHE_BITS;
  index += c->cpu * BPFPROF_ROW_CACHE_CPU_ENTRIES;
  return bpf_map_lookup_elem(&row_cache, &index);
}

static __always_inline long walk_stops(struct unwind_walk* w, __u32 result, __u32 reason) {
  w->result = result;
  w->reason = reason;
  return 1; /* ends bpf_loop */
}

/* The word at a window offset, in one load. Stack words are 8-aligned as a rule, but nothing
 * here relies on it: x86 loads an unaligned word, and the verifier checks alignment only where
 * the architecture needs it (BPF_F_STRICT_ALIGNMENT). A memcpy from the byte array compiled to
 * eight byte loads with shifts and ors, a fifth of a frame's instructions. */
static __always_inline __u64 window_load(const struct unwind_walk* w, __u64 offset) {
  return *(const __u64*)(w->window + offset);
}

/* The window of stack bytes read again around addr (never across a page, so that it fails
 * only where a read of the word would), then the word: for a word outside the window. */
static __noinline long refill_stack_window(struct unwind_walk* w, __u64 addr, __u64* out) {
  __u64 page = addr & ~4095ull;
  __u64 start = addr - STACK_WINDOW_BELOW < page ? page : addr - STACK_WINDOW_BELOW;
  __u64 len = page + 4096 - start;
  if (len > STACK_WINDOW_BYTES) len = STACK_WINDOW_BYTES;
  w->window_len = 0;
  if (addr - start + 8 > len || bpf_probe_read_user(w->window, len, (void*)start))
    return bpf_probe_read_user(out, 8, (void*)addr); /* a word across pages: read alone */
  w->window_start = start;
  w->window_len = len;
  __u64 offset = addr - start;
  if (offset > STACK_WINDOW_BYTES - 8) return -1;
  *out = window_load(w, offset);
  return 0;
}

/* The user stack's 8 bytes at addr if the walk's window holds them. */
static __always_inline bool window_word(const struct unwind_walk* w, __u64 addr, __u64* out) {
  const __u64 offset = addr - w->window_start;
  if (addr < w->window_start || offset + 8 > w->window_len || offset > STACK_WINDOW_BYTES - 8)
    return false;
  *out = window_load(w, offset);
  return true;
}

/* The user stack's 8 bytes at addr, from the walk's window of stack bytes; the call that
 * reads the window again only when the word lies outside it (most words do not: a frame's
 * return address and saved rbp lie just above the last ones read). 0 on success, as
 * bpf_probe_read_user. */
static __always_inline long read_stack_word(struct unwind_walk* w, __u64 addr, __u64* out) {
  return window_word(w, addr, out) ? 0 : refill_stack_window(w, addr, out);
}

/* Binary searches without branches on the compared values: with a branch per step the
 * verifier explores both halves at every step with different bounds (loading took 7 s);
 * moving lo or hi by arithmetic leaves one path. `right` is 1 when the probe lies at or below
 * the key; the barrier keeps the compiler from turning the arithmetic back into a branch. */
static __always_inline void search_step(__u64* lo, __u64* hi, __u64 mid, __u64 probe, __u64 key) {
  __u64 right = ((key - probe) >> 63) ^ 1; /* probe and key are below 2^63 */
  asm volatile("" : "+r"(right));
  *lo += right * (mid + 1 - *lo);
  *hi -= (1 - right) * (*hi - mid);
}

/* The mapping holding pc: the last one starting at or below it, if it reaches pc. */
static __always_inline const struct bpfprof_exec_mapping* find_mapping(
    const struct bpfprof_process_mappings* pm, __u64 pc) {
  if (!pm) return NULL;
  __u64 lo = 0, hi = pm->count;
  if (hi > BPFPROF_MAX_PROCESS_MAPPINGS) hi = BPFPROF_MAX_PROCESS_MAPPINGS;
  if (pc >> 63) return NULL;
  for (int i = 0; i < BPFPROF_MAPPING_SEARCH_STEPS && lo < hi; i++) {
    __u64 mid = (lo + hi) / 2;
    if (mid >= BPFPROF_MAX_PROCESS_MAPPINGS) return NULL;
    search_step(&lo, &hi, mid, pm->mappings[mid].start, pc);
  }
  if (lo == 0 || lo > BPFPROF_MAX_PROCESS_MAPPINGS) return NULL;
  const struct bpfprof_exec_mapping* m = &pm->mappings[lo - 1];
  return pc < m->end ? m : NULL;
}

/* Row `index` of the row array, through its chunk; NULL past the chunks added. */
static __always_inline const struct bpfprof_unwind_entry* unwind_row_at(__u32 index) {
  const __u32 block = index / BPFPROF_UNWIND_BLOCK_ROWS;
  const __u32 chunk = block / BPFPROF_UNWIND_CHUNK_BLOCKS;
  void* rows_chunk = bpf_map_lookup_elem(&unwind_rows, &chunk);
  if (!rows_chunk) return NULL;
  const __u32 in_chunk = block % BPFPROF_UNWIND_CHUNK_BLOCKS;
  const struct bpfprof_unwind_row_block* rows = bpf_map_lookup_elem(rows_chunk, &in_chunk);
  if (!rows) return NULL;
  return &rows->rows[index % BPFPROF_UNWIND_BLOCK_ROWS];
}

/* The rule of the row covering elf_pc in the mapping's table: the last row starting at or
 * below it in its page (bpf/unwind_table.h). */
static __always_inline const struct bpfprof_unwind_rule* find_row(
    const struct bpfprof_exec_mapping* m, __u64 elf_pc) {
  const __u64 page_number = elf_pc >> BPFPROF_UNWIND_PAGE_BITS;
  if (elf_pc > 0xffffffffull || page_number < m->page_base ||
      page_number - m->page_base >= m->page_count)
    return NULL;
  __u32 page_index = m->first_page + (__u32)(page_number - m->page_base);
  const struct bpfprof_unwind_page* page = bpf_map_lookup_elem(&unwind_pages, &page_index);
  if (!page) return NULL;
  const __u64 low = elf_pc & BPFPROF_UNWIND_PAGE_MASK;
  const __u64 first = page->first_row;
  __u64 lo = first, hi = first + page->row_count;
  for (int i = 0; i < BPFPROF_ROW_SEARCH_STEPS && lo < hi; i++) {
    __u32 mid = lo + (hi - lo) / 2;
    const struct bpfprof_unwind_entry* row = unwind_row_at(mid);
    if (!row) return NULL;
    search_step(&lo, &hi, mid, row->pc_low, low);
  }
  if (lo < hi || lo == first) return NULL;
  const struct bpfprof_unwind_entry* row = unwind_row_at(lo - 1);
  if (!row) return NULL;
  __u32 rule = row->rule;
  return bpf_map_lookup_elem(&unwind_rules, &rule);
}

#define VM_EXEC_FLAG 0x4

/* One VMA into `out` if it maps a file whose table is loaded; false otherwise. The file's
 * pointers are read with probe reads: loaded directly from a trusted pointer, each pointer
 * field costs the verifier scans of the kernel's BTF by name (is the field trusted?), ~1 ms
 * apiece for each path it checks: the exec and mmap programs took 13-15 ms to load, now <5. */
static __always_inline bool vma_table_mapping(struct vm_area_struct* vma,
                                              struct bpfprof_exec_mapping* out) {
  if (!(vma->vm_flags & VM_EXEC_FLAG)) return false;
  struct file* file = BPF_CORE_READ(vma, vm_file);
  if (!file) return false;
  struct bpfprof_file_key key = {.dev = BPF_CORE_READ(file, f_inode, i_sb, s_dev),
                                 .inode = BPF_CORE_READ(file, f_inode, i_ino)};
  const struct bpfprof_file_table* table = bpf_map_lookup_elem(&unwind_files, &key);
  if (!table || !table->page_count) return false;
  out->start = vma->vm_start;
  out->end = vma->vm_end;
  out->bias = vma->vm_start - (vma->vm_pgoff << 12) - table->vaddr_minus_offset;
  out->first_page = table->first_page;
  out->page_count = table->page_count;
  out->page_base = table->page_base;
  out->kind = BPFPROF_MAPPING_TABLE;
  return true;
}

/* An anonymous executable VMA (JIT code; not the vdso, whose VMA has special operations) into
 * `out` as frame-pointer code. */
static __always_inline void vma_anonymous_code(struct vm_area_struct* vma,
                                               struct bpfprof_exec_mapping* out) {
  if (!(vma->vm_flags & VM_EXEC_FLAG) || BPF_CORE_READ(vma, vm_file) || BPF_CORE_READ(vma, vm_ops))
    return;
  out->start = vma->vm_start;
  out->end = vma->vm_end;
  out->kind = BPFPROF_MAPPING_FRAME_POINTERS;
}

/* bpf_find_vma's callback: the mapping of the VMA, if its file's table is loaded (kind
 * BPFPROF_MAPPING_TABLE) or it is anonymous code (BPFPROF_MAPPING_FRAME_POINTERS, which the
 * caller takes only for a V8 process); left zeroed otherwise. `data` is on the BPF stack, as
 * the helper requires. */
static long find_vma_table(struct task_struct* task, struct vm_area_struct* vma, void* data) {
  if (!vma_table_mapping(vma, data)) vma_anonymous_code(vma, data);
  return 0;
}

/* Whether addr lies in the mapping the walk last found from a VMA (none yet: end 0). */
static __always_inline bool in_vma_mapping(const struct unwind_walk* w, __u64 addr) {
  return w->vma_mapping.start <= addr && addr < w->vma_mapping.end;
}

/* The mapping of w->pc from the task's VMA and the table of its file, into w->vma_mapping:
 * for a pc that the process's value does not cover (yet). False if its file has no table, or
 * it is anonymous code in a process whose JIT code has no frame pointers as far as we know.
 * In the sampling interrupt a program gets one VMA lookup (the mmap lock's release is
 * deferred to an irq_work, busy until the program ends), so the mapping found is kept for
 * the walk's next frames: the first milliseconds' stacks cross one library not known yet. */
__noinline int mapping_from_vma(struct unwind_walk* w) {
  if (!w) return 0;
  if (in_vma_mapping(w, w->pc)) return 1;
  struct bpfprof_exec_mapping found = {0};
  if (bpf_find_vma(bpf_get_current_task_btf(), w->pc, find_vma_table, &found, 0) ||
      found.end <= w->pc)
    return 0;
  if (found.kind == BPFPROF_MAPPING_FRAME_POINTERS ? !w->jit_frame_pointers : !found.page_count)
    return 0;
  w->vma_mapping = found;
  return 1;
}

extern int bpf_iter_task_vma_new(struct bpf_iter_task_vma* it, struct task_struct* task,
                                 __u64 addr) __weak __ksym;
extern struct vm_area_struct* bpf_iter_task_vma_next(struct bpf_iter_task_vma* it) __weak __ksym;
extern void bpf_iter_task_vma_destroy(struct bpf_iter_task_vma* it) __weak __ksym;

/* A young image maps a few dozen VMAs; one with more is past its first milliseconds. */
#define IMAGE_VMA_SCAN_LIMIT 512

static __always_inline __u32 next_image_generation(void) {
  __u32 zero = 0;
  __u32* count = bpf_map_lookup_elem(&image_generations, &zero);
  if (!count) return BPFPROF_KERNEL_WRITTEN_GENERATION;
  *count += 1;
  return BPFPROF_KERNEL_WRITTEN_GENERATION | (bpf_get_smp_processor_id() & 0x7f) << 24 |
         (*count & 0xffffff);
}

/* A new image's entry, from its VMAs: the mappings whose files' tables are loaded. Written
 * at exec in place of the old image's (the program and ld.so, as a rule), and again at each
 * mmap until userspace has written its own from the side band (milliseconds later: the
 * reader is woken, reads, writes), so that the libraries ld.so maps meanwhile are in it too.
 * Without it the first samples' frames were found by the walk's one VMA lookup, and a stack
 * through two files not in the entry fell back to a stack copy. The VMA iterator runs at
 * these tracepoints, with interrupts on; in the sampling interrupt it refuses. False if the
 * VMAs could not be read. */
static __noinline int image_mappings_write(struct task_struct* task, __u32 tgid) {
  __u32 zero = 0;
  struct image_scan* scan = bpf_map_lookup_elem(&image_scan_scratch, &zero);
  if (!scan || !task) return 0;
  scan->list.count = 0;
  scan->list.flags = 0;
  scan->scanned = 0;
  struct bpf_iter_task_vma it;
  if (bpf_iter_task_vma_new(&it, task, 0) != 0) {
    bpf_iter_task_vma_destroy(&it);
    return 0;
  }
  struct vm_area_struct* vma;
  while ((vma = bpf_iter_task_vma_next(&it))) {
    const __u32 count = scan->list.count;
    if (count >= BPFPROF_MAX_PROCESS_MAPPINGS || scan->scanned >= IMAGE_VMA_SCAN_LIMIT) break;
    scan->scanned += 1;
    if (vma_table_mapping(vma, &scan->list.mappings[count & (BPFPROF_MAX_PROCESS_MAPPINGS - 1)]))
      scan->list.count = count + 1;
  }
  bpf_iter_task_vma_destroy(&it);
  scan->list.generation = next_image_generation();
  scan->list.kernel_written_ns = bpf_ktime_get_ns();
  return bpf_map_update_elem(&unwind_processes, &tgid, &scan->list, BPF_ANY) == 0;
}

/* Code without a table (JIT): the saved rbp and return address sit at rbp. */
static __always_inline long frame_pointer_step(struct unwind_walk* w) {
  if (!w->bp_known || w->bp < w->sp || w->bp == 0)
    return walk_stops(w, WALK_FALLBACK, BPFPROF_FALLBACK_FRAME_POINTER);
  __u64 saved_bp, return_address;
  if (read_stack_word(w, w->bp, &saved_bp) || read_stack_word(w, w->bp + 8, &return_address))
    return walk_stops(w, WALK_FALLBACK, BPFPROF_FALLBACK_READ);
  w->sp = w->bp + 16;
  w->bp = saved_bp;
  w->bx_known = 0; /* code without a table: where it keeps rbx is not known */
  w->pc = return_address;
  w->exact = 0;
  w->bump = 0;
  return w->pc ? 0 : walk_stops(w, WALK_FALLBACK, BPFPROF_FALLBACK_BAD_FRAME);
}

/* __restore_rt: the interrupted frame's registers are in the ucontext at sp; its pc is exact.
 * The trampoline's own frame, already recorded, is nudged like the interrupted pc (as the
 * userspace unwinder does, so both modes give the same frames). */
static __always_inline long signal_step(struct unwind_walk* w, struct bpfprof_frames_event* e,
                                        __u32 depth) {
  __u64 rip, rsp, rbp;
  if (read_stack_word(w, w->sp + BPFPROF_SIGFRAME_RIP, &rip) ||
      read_stack_word(w, w->sp + BPFPROF_SIGFRAME_RSP, &rsp) ||
      read_stack_word(w, w->sp + BPFPROF_SIGFRAME_RBP, &rbp))
    return walk_stops(w, WALK_FALLBACK, BPFPROF_FALLBACK_READ);
  /* The leaf (a thread in rt_sigreturn) is exact. */
  if (depth) e->ips[depth & BPFPROF_UNWOUND_INDEX_MASK] += 1;
  w->bx_slot = w->sp + BPFPROF_SIGFRAME_RBX;
  w->bx_known = 1;
  w->pc = rip;
  w->sp = rsp;
  w->bp = rbp;
  w->bp_known = 1;
  w->exact = 1;
  w->bump = 1;
  return rip ? 0 : walk_stops(w, WALK_FALLBACK, BPFPROF_FALLBACK_BAD_FRAME);
}

/* The CFA by a rule that computes it (RSP, RBP with rbp known, PLT); false for the others.
 * Only the ELF address's low 4 bits matter (a PLT slot's). */
static __always_inline bool rule_cfa(const struct bpfprof_unwind_rule* row, __u64 elf_pc, __u64 sp,
                                     __u64 bp, __u32 bp_known, __u64* cfa) {
  switch (row->cfa_rule) {
    case BPFPROF_CFA_RSP:
      *cfa = sp + row->cfa_offset;
      return true;
    case BPFPROF_CFA_RBP:
      *cfa = bp + row->cfa_offset;
      return bp_known;
    case BPFPROF_CFA_PLT:
      *cfa = sp + row->cfa_offset + ((elf_pc & 15) >= 11 ? 8 : 0);
      return true;
    default:
      return false;
  }
}

/* Where the caller's rbx is after a step by the row's rbx rule: an address, not the value
 * (read only where a frame's CFA needs it). */
static __always_inline void caller_bx(const struct bpfprof_unwind_rule* row, __u64 cfa,
                                      __u64* bx_slot, __u32* bx_known) {
  if (row->rbx_rule == BPFPROF_RBP_AT_CFA) {
    *bx_slot = cfa + row->rbx_offset;
    *bx_known = 1;
  } else if (row->rbx_rule != BPFPROF_RBP_SAME) {
    *bx_known = 0;
  }
}

/* The CFA of a BPFPROF_CFA_RBX frame: the frame's rbx, from the leaf's registers or where a
 * callee saved it. False if it is not known or cannot be read. */
static __always_inline bool rbx_cfa(struct unwind_walk* w, __u64* cfa) {
  __u64 bx = w->leaf_bx;
  if (!w->bx_known || (w->bx_slot && read_stack_word(w, w->bx_slot, &bx))) return false;
  *cfa = bx + w->row.cfa_offset;
  return true;
}

/* Whether the caller's rbp is known after a step by the row's rbp rule. */
static __always_inline __u32 caller_bp_known(const struct bpfprof_unwind_rule* row,
                                             __u32 bp_known) {
  return row->rbp_rule == BPFPROF_RBP_AT_CFA ? 1 : row->rbp_rule == BPFPROF_RBP_SAME ? bp_known : 0;
}

/* vfork between its pop of the return address into rdi and its push back: only the innermost
 * frame has rdi (the registers of the sample). The caller's sp is the CFA, which may equal sp
 * (nothing is on the stack); bp is unchanged. */
static __always_inline long return_in_rdi_step(struct unwind_walk* w, __u32 depth) {
  if (depth != 0 || !w->exact) return walk_stops(w, WALK_FALLBACK, BPFPROF_FALLBACK_UNKNOWN_ROW);
  w->sp += w->row.cfa_offset;
  w->pc = w->leaf_di;
  w->exact = 0;
  w->bump = 0;
  return w->pc ? 0 : walk_stops(w, WALK_FALLBACK, BPFPROF_FALLBACK_BAD_FRAME);
}

/* The sp of the goroutine frame that asmcgocall left for the system stack: its depth below
 * g.stack.hi, kept with g in the system stack's frame (BPFPROF_CFA_GO_CGO_CALL). */
static __always_inline bool go_goroutine_sp(const struct unwind_walk* w, __u64* sp) {
  __u64 slots[2]; /* depth (or sp), g */
  __u64 stack[2]; /* g.stack.lo, g.stack.hi */
  if (bpf_probe_read_user(slots, sizeof(slots), (void*)(w->sp + w->row.rbx_offset))) return false;
  if (!slots[1]) {
    *sp = slots[0];
    return slots[0] > w->sp;
  }
  if (bpf_probe_read_user(stack, sizeof(stack), (void*)slots[1])) return false;
  *sp = stack[1] - slots[0];
  return stack[0] <= *sp && *sp < stack[1];
}

/* The sched.sp of one of the thread's Gs, found through its M: g from the thread pointer, g.m,
 * then the G at `m_field` of the M: g0, whose sched.sp keeps cgocallback's frame on the system
 * stack while Go runs the callback (BPFPROF_CFA_GO_CGO_CALLBACK), or curg, the goroutine that
 * systemstack left and returns to (BPFPROF_CFA_GO_SYSTEMSTACK). */
static __always_inline bool go_sched_sp(const struct unwind_walk* w, __u64 m_field, __u64* sp) {
  const struct task_struct* task = (const struct task_struct*)w->task;
  __u64 g, m, other;
  const __u64 fsbase = BPF_CORE_READ(task, thread.fsbase);
  return fsbase && !bpf_probe_read_user(&g, 8, (void*)(fsbase + w->row.rbx_offset)) &&
         !bpf_probe_read_user(&m, 8, (void*)(g + BPFPROF_GO_G_M)) &&
         !bpf_probe_read_user(&other, 8, (void*)(m + m_field)) &&
         !bpf_probe_read_user(sp, 8, (void*)(other + BPFPROF_GO_G_SCHED_SP)) && *sp;
}

/* A switch of stacks (cgo's, systemstack's): the caller's frame is on the other stack. Where the
 * runtime's words cannot be read, the stack ends here, as Go's own traceback does. */
static __always_inline long go_switch_step(struct unwind_walk* w) {
  const struct bpfprof_unwind_rule* row = &w->row;
  __u64 sp, return_address;
  const __u64 m_field = row->cfa_rule == BPFPROF_CFA_GO_CGO_CALLBACK
                            ? BPFPROF_GO_M_G0
                            : (__u64)row->go_m_curg_words * 8;
  if (!(row->cfa_rule == BPFPROF_CFA_GO_CGO_CALL ? go_goroutine_sp(w, &sp)
                                                 : go_sched_sp(w, m_field, &sp)))
    return walk_stops(w, WALK_ROOT, 0);
  const __u64 cfa = sp + row->cfa_offset;
  if (read_stack_word(w, cfa - 8, &return_address) ||
      (row->rbp_rule == BPFPROF_RBP_AT_CFA && read_stack_word(w, cfa + row->rbp_offset, &w->bp)))
    return walk_stops(w, WALK_ROOT, 0);
  w->bp_known = caller_bp_known(row, w->bp_known);
  w->bx_known = 0;
  w->sp = cfa;
  w->pc = return_address;
  w->exact = 0;
  w->bump = 0;
  return return_address ? 0 : walk_stops(w, WALK_ROOT, 0);
}

/* One step with the frame's row (bpf/unwind_table.h): CFA, return address, caller's rbp. */
static __always_inline long table_step(struct unwind_walk* w, struct bpfprof_frames_event* e,
                                       __u32 depth) {
  const struct bpfprof_unwind_rule* row = &w->row;
  if (row->cfa_rule == BPFPROF_CFA_ROOT) return walk_stops(w, WALK_ROOT, 0);
  if (row->cfa_rule == BPFPROF_CFA_SIGNAL) return signal_step(w, e, depth);
  if (row->cfa_rule == BPFPROF_CFA_RSP_RETURN_IN_RDI) return return_in_rdi_step(w, depth);
  if (row->cfa_rule >= BPFPROF_CFA_GO_CGO_CALL && row->cfa_rule <= BPFPROF_CFA_GO_SYSTEMSTACK)
    return go_switch_step(w);
  __u64 cfa;
  if (row->cfa_rule == BPFPROF_CFA_RBX ? !rbx_cfa(w, &cfa)
                                       : !rule_cfa(row, w->elf_pc, w->sp, w->bp, w->bp_known, &cfa))
    return walk_stops(w, WALK_FALLBACK,
                      row->cfa_rule == BPFPROF_CFA_RBP ? BPFPROF_FALLBACK_FRAME_POINTER
                                                       : BPFPROF_FALLBACK_UNKNOWN_ROW);
  /* A caller's frame lies above its callee's: anything else is a rule gone wrong, and a
   * walk that could loop. */
  if (cfa <= w->sp) return walk_stops(w, WALK_FALLBACK, BPFPROF_FALLBACK_BAD_FRAME);
  __u64 return_address;
  if (read_stack_word(w, cfa - 8, &return_address))
    return walk_stops(w, WALK_FALLBACK, BPFPROF_FALLBACK_READ);
  if (row->rbp_rule == BPFPROF_RBP_AT_CFA && read_stack_word(w, cfa + row->rbp_offset, &w->bp))
    return walk_stops(w, WALK_FALLBACK, BPFPROF_FALLBACK_READ);
  w->bp_known = caller_bp_known(row, w->bp_known);
  caller_bx(row, cfa, &w->bx_slot, &w->bx_known);
  w->sp = cfa;
  w->pc = return_address;
  w->exact = 0;
  w->bump = 0;
  return return_address ? 0 : walk_stops(w, WALK_FALLBACK, BPFPROF_FALLBACK_BAD_FRAME);
}

/* The innermost frame at a pc that no rule covers, such as a system call made after the
 * code's FDE ended (glibc's clone and clone3 end theirs before the syscall, for the child's
 * sake): if the word at sp is a return address, in executable code (a mapping of the
 * process's entry, or the one the walk found from a VMA: a new image's libc) and just past a
 * call instruction, the function has pushed nothing and its caller continues there.
 * Anything else falls back. */
static __always_inline long leaf_step_without_rule(struct unwind_walk* w,
                                                   struct bpfprof_process_mappings* mappings) {
  __u64 return_address;
  __u8 code[8];
  if (bpf_probe_read_user(&return_address, 8, (void*)w->sp) || return_address < 8 ||
      (!find_mapping(mappings, return_address) && !in_vma_mapping(w, return_address)) ||
      bpf_probe_read_user(code, sizeof(code), (void*)(return_address - 8)) ||
      !bpfprof_follows_call(code))
    return walk_stops(w, WALK_FALLBACK, BPFPROF_FALLBACK_UNKNOWN_ROW);
  w->sp += 8;
  w->pc = return_address;
  w->exact = 0;
  w->bump = 0;
  return 0;
}

/* Whether the instruction before pc is `syscall` (0f 05). A thread in a system call has its
 * user pc just past that instruction, which can be past the end of the code's FDE: glibc's
 * __restore_rt ends its CFI before rt_sigreturn returns (it never does). The syscall
 * instruction moves no register the rules use, so its row is the pc's. */
static __always_inline int follows_syscall(__u64 pc) {
  __u8 code[2];
  return pc >= 2 && !bpf_probe_read_user(code, sizeof(code), (void*)(pc - 2)) && code[0] == 0x0f &&
         code[1] == 0x05;
}

/* Whether the leaf is the child side of glibc's clone or clone3 (bpf/unwind_table.h): the
 * thread's outermost frame. */
static __always_inline bool is_clone_child(const struct unwind_walk* w) {
  __u8 window[BPFPROF_CLONE_WINDOW_BYTES];
  return w->leaf_ax == 0 &&
         bpf_probe_read_user(window, sizeof(window),
                             (void*)(w->pc - BPFPROF_CLONE_WINDOW_BEFORE)) == 0 &&
         bpfprof_in_clone_child_start(window);
}

/* Whether the cache holds the row of w->pc for this process's mappings: then it is in w. The
 * cache's entries are looked up again to fill them (row_cache_fill), so that no pointer to
 * one lives across the binary searches (the verifier would walk them twice: with and
 * without it). */
static __always_inline bool row_cache_hit(struct unwind_context* c, struct unwind_walk* w) {
  const __u64 key = row_cache_key(w);
  struct row_cache_entry* cached = row_cache_entry_for(c, key);
  if (!cached || !c->mappings || !cached->generation ||
      cached->generation != c->mappings->generation || cached->key != key)
    return false;
  w->row = cached->row;
  w->elf_pc = cached->elf_pc_phase;
  return true;
}

static __always_inline void row_cache_fill(struct unwind_context* c, struct unwind_walk* w) {
  const __u64 key = row_cache_key(w);
  struct row_cache_entry* cached = row_cache_entry_for(c, key);
  if (!cached || !c->mappings) return;
  cached->generation = 0; /* empty while it is filled */
  cached->key = key;
  cached->elf_pc_phase = w->elf_pc & 15;
  cached->row = w->row;
  cached->generation = c->mappings->generation;
}

/* The registers of a frame on the fast path (fast_steps). */
struct fast_frame {
  __u64 pc;
  __u64 sp;
  __u64 bp;
  __u64 bx_slot;
  __u32 bp_known;
  __u32 bx_known;
  __u32 depth;
};

/* The caller of a return-address frame f whose row is in the cache, with words from the
 * window only; false (f unchanged) for anything else, which unwind_step's general path then
 * takes: a cache miss, a signal, root or unknown rule, a word outside the window, a frame
 * that goes nowhere. table_step's arithmetic (rule_cfa, caller_bp_known), on registers
 * rather than the walk's map value, and never refilling the window. */
static __always_inline bool fast_step(const struct unwind_context* c, const struct unwind_walk* w,
                                      __u32 generation, struct fast_frame* f) {
  const struct row_cache_entry* cached = row_cache_entry_for(c, f->pc);
  if (!cached || cached->generation != generation || cached->key != f->pc) return false;
  const struct bpfprof_unwind_rule* row = &cached->row;
  __u64 cfa, return_address, bp = f->bp;
  if (!rule_cfa(row, cached->elf_pc_phase, f->sp, f->bp, f->bp_known, &cfa) || cfa <= f->sp ||
      !window_word(w, cfa - 8, &return_address) || !return_address ||
      (row->rbp_rule == BPFPROF_RBP_AT_CFA && !window_word(w, cfa + row->rbp_offset, &bp)))
    return false;
  f->bp = bp;
  f->bp_known = caller_bp_known(row, f->bp_known);
  caller_bx(row, cfa, &f->bx_slot, &f->bx_known);
  f->sp = cfa;
  f->pc = return_address;
  return true;
}

/* Up to FAST_FRAMES return-address frames recorded and stepped through with their state in
 * registers: most of a walk's frames are row-cache hits whose words lie in the window, and
 * this path costs a third of the general one. The walk is left at the first frame it did not
 * step. */
#define FAST_FRAMES 8
static __always_inline void fast_steps(const struct unwind_context* c, struct unwind_walk* w,
                                       struct bpfprof_frames_event* e) {
  if (w->exact || w->bump || !c->mappings) return;
  const __u32 generation = c->mappings->generation;
  struct fast_frame f = {.pc = w->pc,
                         .sp = w->sp,
                         .bp = w->bp,
                         .bx_slot = w->bx_slot,
                         .bp_known = w->bp_known,
                         .bx_known = w->bx_known,
                         .depth = w->depth};
  for (int i = 0; i < FAST_FRAMES; i++) {
    if (f.depth >= BPFPROF_MAX_UNWOUND_FRAMES) break;
    const __u64 pc = f.pc;
    const __u64 bp = f.bp_known ? f.bp : 0;
    if (!fast_step(c, w, generation, &f)) break;
    /* The barrier keeps the compiler from stepping a pointer into frame_bp by 8 a frame,
     * whose bound the verifier then loses. */
    __u32 index = f.depth & BPFPROF_UNWOUND_INDEX_MASK;
    asm volatile("" : "+r"(index));
    e->ips[index] = pc;
    w->frame_bp[index & BPFPROF_UNWOUND_INDEX_MASK] = bp;
    f.depth += 1;
  }
  w->pc = f.pc;
  w->sp = f.sp;
  w->bp = f.bp;
  w->bp_known = f.bp_known;
  w->bx_slot = f.bx_slot;
  w->bx_known = f.bx_known;
  w->depth = f.depth;
}

/* A JVM's code cache is stepped through with its blobs' frame sizes (after the helpers above). */
#include "runtimes/hotspot/walk.bpf.h"

/* bpf_loop's callback: records the current frame's pc, then steps to its caller. */
static long unwind_step(__u64 index, void* context) {
  struct unwind_context* c = context;
  struct unwind_walk* w = c->walk;
  struct bpfprof_frames_event* e = c->event;
  fast_steps(c, w, e);
  const __u32 depth = w->depth;
  if (depth >= BPFPROF_MAX_UNWOUND_FRAMES) return walk_stops(w, WALK_CUT, 0);
  e->ips[depth & BPFPROF_UNWOUND_INDEX_MASK] = w->pc + w->bump;
  w->frame_bp[depth & BPFPROF_UNWOUND_INDEX_MASK] = w->bp_known ? w->bp : 0;
  w->depth = depth + 1;
  if (row_cache_hit(c, w)) return table_step(w, e, depth);
  if (c->hotspot && hotspot_code_contains(c->hotspot, w->pc))
    return hotspot_step(w, c->hotspot, c->slot, depth) ? 1 : 0; /* a global's result is any int */
  const struct bpfprof_exec_mapping* known = find_mapping(c->mappings, w->pc);
  if (known && known->kind != BPFPROF_MAPPING_FALLBACK) {
    w->frame_mapping = *known;
    w->frame_mapping_from_vma = 0;
  } else if (mapping_from_vma(w)) {
    w->frame_mapping = w->vma_mapping;
    w->frame_mapping_from_vma = 1;
  } else {
    return walk_stops(w, WALK_FALLBACK,
                      known ? BPFPROF_FALLBACK_NOT_LOADED : BPFPROF_FALLBACK_UNMAPPED);
  }
  const struct bpfprof_exec_mapping* m = &w->frame_mapping;
  if (m->kind == BPFPROF_MAPPING_FRAME_POINTERS) {
    w->frame_bp[depth & BPFPROF_UNWOUND_INDEX_MASK] |= FRAME_BP_ANONYMOUS_CODE;
    return frame_pointer_step(w);
  }
  if (m->kind != BPFPROF_MAPPING_TABLE)
    return walk_stops(w, WALK_FALLBACK, BPFPROF_FALLBACK_NOT_LOADED);
  /* A return address is one past its call, which may be the last instruction of a
   * function: the call site's row is that of the byte before. */
  __u64 elf_pc = (w->exact ? w->pc : w->pc - 1) - m->bias;
  const struct bpfprof_unwind_rule* row = find_row(m, elf_pc);
  if ((!row || row->cfa_rule == BPFPROF_CFA_UNKNOWN) && depth == 0 && w->exact) {
    if (is_clone_child(w)) return walk_stops(w, WALK_ROOT, 0);
    /* A thread in a system call whose FDE ends before it: the syscall's row (__restore_rt);
     * else (clone's parent) a leaf that pushed nothing. */
    if (follows_syscall(w->pc)) {
      elf_pc -= 1;
      row = find_row(m, elf_pc);
    }
    if (!row || row->cfa_rule == BPFPROF_CFA_UNKNOWN) return leaf_step_without_rule(w, c->mappings);
  }
  if (!row) return walk_stops(w, WALK_FALLBACK, BPFPROF_FALLBACK_UNKNOWN_ROW);
  w->row = *row;
  w->elf_pc = elf_pc;
  /* A leaf without a rule goes its own way above, every time. */
  if (row->cfa_rule != BPFPROF_CFA_UNKNOWN && !w->frame_mapping_from_vma) row_cache_fill(c, w);
  return table_step(w, e, depth);
}

static __always_inline void count_unwind_outcome(__u32 reason) {
  __u64* count = bpf_map_lookup_elem(&unwind_fallbacks, &reason);
  if (count) *count += 1; /* per CPU: no other writer */
}

/* Walks the user stack of `task` into e->ips and sets e->head.user_depth. True when the walk
 * reached a thread root or the depth limit (or the task has no user context); false when the
 * sample must fall back to a stack copy (the reason counted). `slot`: SAMPLE_SLOT or
 * TRACEPOINT_SLOT. */
static __always_inline bool walk_user_stack(struct task_struct* task, __u32 tgid, __u32 slot,
                                            struct bpfprof_frames_event* e) {
  e->head.user_depth = 0;
  if (!task->mm) return true; /* a kernel thread */
  struct pt_regs* regs = (struct pt_regs*)bpf_task_pt_regs(task);
  if (!regs) return true;
  /* Without it (the process's first milliseconds) every frame's table is found from its VMA. */
  struct bpfprof_process_mappings* pm = bpf_map_lookup_elem(&unwind_processes, &tgid);
  struct unwind_walk* w = bpf_map_lookup_elem(&unwind_walks, &slot);
  if (!w) return false;
  w->pc = user_pc(regs);
  w->sp = regs->sp;
  w->bp = regs->bp;
  w->leaf_ax = regs->ax;
  w->leaf_di = regs->di;
  w->leaf_bx = regs->bx;
  w->bx_slot = 0;
  w->bx_known = 1;
  w->depth = 0;
  w->result = WALK_GOING;
  w->reason = 0;
  w->exact = 1;
  w->bump = 0;
  w->bp_known = 1;
  w->window_len = 0;
  w->vma_mapping.end = 0;
  w->jit_frame_pointers = pm && (pm->flags & BPFPROF_PROCESS_JIT_FRAME_POINTERS);
  w->task = (__u64)task;
  struct unwind_context c = {
      .walk = w, .event = e, .mappings = pm, .slot = slot, .cpu = bpf_get_smp_processor_id()};
  if (runtime_processes[BPFPROF_RUNTIME_HOTSPOT]) {
    c.hotspot = bpf_map_lookup_elem(&hotspot_processes, &tgid);
    if (c.hotspot) hotspot_walk_start(slot, task->pid);
  }
  bpf_loop(BPFPROF_MAX_UNWOUND_FRAMES + 1, unwind_step, &c, 0);
  /* Each step records a frame: the loop ends at the depth limit at the latest. */
  if (w->result == WALK_GOING) w->result = WALK_CUT;
  if (w->result == WALK_FALLBACK) {
    count_unwind_outcome(pm ? w->reason : BPFPROF_FALLBACK_NO_PROCESS);
    return false;
  }
  if (w->result == WALK_CUT) count_unwind_outcome(BPFPROF_WALK_CUT_AT_DEPTH);
  e->head.user_depth = w->depth;
  return true;
}

/* Walks the current task's user stack into frames_scratch's `slot` (walk_user_stack). A
 * global function: the verifier checks it once per program, on its own, instead of once
 * for each state its callers reach it in (sched_switch's paths reached it twice). */
__noinline int unwind_current_user_stack(__u32 tgid, __u32 slot) {
  slot &= 1;
  struct bpfprof_frames_event* e = bpf_map_lookup_elem(&frames_scratch, &slot);
  if (!e) return 0;
  return walk_user_stack(bpf_get_current_task_btf(), tgid, slot, e);
}

#endif
