/* The innermost frame (the leaf) where no CFI row covers its pc: a thread in a system call
 * after its code's FDE ended, the child side of clone, a leaf that has pushed nothing. */
#ifndef BPFPROF_LEAF_STEP_H
#define BPFPROF_LEAF_STEP_H

#include "vmlinux.h"

#include <bpf/bpf_helpers.h>

#include "bpf/maps.h"
#include "bpf/unwind_lookup.h"
#include "bpf/unwind_maps.h"
#include "bpf/unwind_table.h"
#include "bpf/unwind_walk.h"
#include "bpf/vma_mapping.h"

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
  return walk_to_caller(w, w->sp + 8, return_address);
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

#endif
