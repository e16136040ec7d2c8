/* Mappings found from the task's VMAs, for code the process's value (written by userspace)
 * does not hold yet: a file whose table is loaded (unwind_files), or anonymous code. */
#ifndef BPFPROF_VMA_MAPPING_H
#define BPFPROF_VMA_MAPPING_H

#include "vmlinux.h"

#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>

#include "bpf/maps.h"
#include "bpf/unwind_maps.h"

#define VM_EXEC_FLAG 0x4

/* One VMA into `out` if it maps a file whose table is loaded; false otherwise. The file's
 * pointers are read with probe reads: loaded directly from a trusted pointer, each pointer
 * field costs the verifier a scan of the kernel's BTF by name (is the field trusted?) for
 * each path it checks, which the exec and mmap programs' many paths multiply. */
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

#endif
