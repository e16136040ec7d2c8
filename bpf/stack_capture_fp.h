/* User-stack capture, frame-pointer flavour: the kernel walks the frame-pointer chain from
 * the thread's saved user registers. Kept as one piece so a DWARF-capable capture (registers
 * plus a copy of the stack top) can replace it. Returns the number of frames written. */
#ifndef BPFPROF_STACK_CAPTURE_FP_H
#define BPFPROF_STACK_CAPTURE_FP_H

#include "vmlinux.h"

#include <bpf/bpf_helpers.h>

static __always_inline __u32 capture_user_stack(void* ctx, __u64* ips, __u32 max_depth) {
  long bytes = bpf_get_stack(ctx, ips, max_depth * sizeof(__u64), BPF_F_USER_STACK);
  return bytes > 0 ? (__u32)(bytes / sizeof(__u64)) : 0;
}

static __always_inline __u32 capture_kernel_stack(void* ctx, __u64* ips, __u32 max_depth) {
  long bytes = bpf_get_stack(ctx, ips, max_depth * sizeof(__u64), 0);
  return bytes > 0 ? (__u32)(bytes / sizeof(__u64)) : 0;
}

#endif
