/* A new image's entry in unwind_processes, written from its VMAs at exec and at its mmaps
 * until userspace writes its own (image_mappings_write). */
#ifndef BPFPROF_IMAGE_MAPPINGS_H
#define BPFPROF_IMAGE_MAPPINGS_H

#include "vmlinux.h"

#include <bpf/bpf_helpers.h>

#include "bpf/maps.h"
#include "bpf/unwind_maps.h"
#include "bpf/vma_mapping.h"

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
 * Without it the first samples' frames are found only by the walk's one VMA lookup, and a
 * stack through two files not in the entry falls back to a stack copy. The VMA iterator runs at
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

#endif
