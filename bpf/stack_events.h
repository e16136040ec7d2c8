/* Stack events (bpf/events.h): the current task's stacks, for any context (a sample, a
 * switch-out, a waker), in the form the call-graph mode gives: user frames walked in the
 * kernel with the unwind tables (else a copy), a copy, or frames walked by frame pointers;
 * with the kernel stack, and after the runtimes' frames of the same moment. The programs
 * say what to take; the form, the scratch space and the sending are decided here only. */
#ifndef BPFPROF_STACK_EVENTS_H
#define BPFPROF_STACK_EVENTS_H

#include "vmlinux.h"

#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>

#include "bpf/events.h"
#include "bpf/helpers.h"
#include "bpf/knobs.h"
#include "bpf/maps.h"
#include "bpf/runtime_stacks.h"
#include "bpf/stack_capture_fp.h"
#include "bpf/stack_copy.h"
#include "bpf/unwind_user.h"

/* The form of a frames event's user stack in the call-graph mode in force. */
static __always_inline __u8 frames_payload(void) {
  return kernel_unwind ? BPFPROF_PAYLOAD_UNWOUND_FRAMES : BPFPROF_PAYLOAD_FP_FRAMES;
}

/* The head of a stack event of `task` (the current one) taken now: its payload and depths
 * are left to the sender. */
static __always_inline void stack_head(struct bpfprof_stack_event_head* h, struct task_struct* task,
                                       __u8 context, __u8 state, __u8 flags) {
  fill_header(&h->header, BPFPROF_EVENT_STACK, task->tgid, task->pid);
  h->cpu_time_ns = task->se.sum_exec_runtime;
  h->context = context;
  h->payload = 0;
  h->state = state;
  h->flags = flags;
  h->user_depth = 0;
  h->kernel_depth = 0;
  h->reserved = 0;
}

/* The caller's part of a head (header, CPU time, context, state, flags) into the event in
 * scratch space, with the payload its stacks take. */
static __always_inline void set_stack_head(struct bpfprof_stack_event_head* to,
                                           const struct bpfprof_stack_event_head* from,
                                           __u8 payload) {
  to->header = from->header;
  to->cpu_time_ns = from->cpu_time_ns;
  to->context = from->context;
  to->payload = payload;
  to->state = from->state;
  to->flags = from->flags;
  to->reserved = 0;
}

/* Sends a frames event: the user frames already in e->ips, then the kernel stack when it is
 * taken now; before it the runtimes' frames, when those are taken now too. */
static __always_inline void send_frames(void* ctx, struct bpfprof_frames_event* e, __u32 slot,
                                        bool with_kernel, bool with_runtime_frames) {
  const __u32 user_depth = e->head.user_depth & BPFPROF_UNWOUND_INDEX_MASK;
  __u32 kernel_depth = 0;
  if (with_kernel)
    kernel_depth = capture_kernel_stack(ctx, &e->ips[user_depth], BPFPROF_MAX_STACK_DEPTH) & 0x7f;
  e->head.kernel_depth = kernel_depth;
  if (with_runtime_frames)
    send_runtime_stacks(&e->head.header, slot,
                        e->head.payload == BPFPROF_PAYLOAD_UNWOUND_FRAMES && user_depth);
  send_event(e,
             offsetof(struct bpfprof_frames_event, ips) +
                 (__u64)(user_depth + kernel_depth) * sizeof(__u64),
             sizeof(*e), e->head.header.pid);
}

/* The current task's user frames into e->ips and e->head.user_depth, walked as the call-graph
 * mode says: with the unwind tables, or by frame pointers. False when the stack is copied
 * instead: copies are the mode, or the walk cannot reach a root. */
static __always_inline bool take_user_frames(void* ctx, struct bpfprof_frames_event* e, __u32 tgid,
                                             __u32 slot) {
  if (kernel_unwind) return unwind_current_user_stack(tgid, slot);
  if (user_stack_copy_bytes) return false;
  /* bpf_get_stack never returns more than 127 frames; the mask lets the verifier see the
   * bound of the offset at which the kernel frames go (127 == 0x7f). */
  e->head.user_depth = capture_user_stack(ctx, e->ips, BPFPROF_MAX_STACK_DEPTH) & 0x7f;
  return true;
}

/* The pc at which the walk in the kernel in `slot` stopped for a table not loaded, else 0. */
static __always_inline __u64 unloaded_table_pc(__u32 slot) {
  if (!kernel_unwind) return 0;
  struct unwind_walk* w = bpf_map_lookup_elem(&unwind_walks, &slot);
  if (!w || w->result != WALK_FALLBACK || w->reason != BPFPROF_FALLBACK_NOT_LOADED) return 0;
  return w->pc;
}

/* Sends a copy event: the user registers and stack copy when the user stack is taken now,
 * the kernel stack when that is; before it the runtimes' frames, when those are. */
static __always_inline void send_copy(void* ctx, const struct bpfprof_stack_event_head* head,
                                      __u32 slot, bool with_user, bool with_kernel,
                                      bool with_runtime_frames) {
  __u32 index = bpf_get_smp_processor_id() * 2 + slot;
  struct bpfprof_copy_event* e = bpf_map_lookup_elem(&copy_scratch, &index);
  if (!e) return;
  set_stack_head(&e->head, head, BPFPROF_PAYLOAD_COPY);
  e->head.user_depth = 0;
  e->unloaded_table_pc = with_user ? unloaded_table_pc(slot) : 0;
  capture_copy(ctx, e, with_user, with_kernel);
  if (with_runtime_frames) send_runtime_stacks(&e->head.header, slot, false);
  send_event(e, offsetof(struct bpfprof_copy_event, stack) + e->stack_size,
             offsetof(struct bpfprof_copy_event, stack) + BPFPROF_MAX_STACK_COPY,
             e->head.header.pid);
}

/* Sends the current task's stacks in the event `head` describes (its header, context, CPU
 * time, state and flags), in the form the call-graph mode gives; false when the slot was taken
 * by another program during the walk (only a preemptible caller's can be: nothing sent). Only the
 * stacks asked for are taken (none: an event without stacks, as for a stack reused); `slot` is the
 * caller's scratch space (SAMPLE_SLOT, TRACEPOINT_SLOT). */
static __always_inline bool send_stack(void* ctx, const struct bpfprof_stack_event_head* head,
                                       __u32 slot, bool with_user, bool with_kernel,
                                       bool with_runtime_frames) {
  struct bpfprof_frames_event* e = bpf_map_lookup_elem(&frames_scratch, &slot);
  __u64* uses = bpf_map_lookup_elem(&slot_uses, &slot);
  if (!e || !uses) return false;
  const __u64 mine = ++*uses;
  e->head.user_depth = 0;
  if (with_user && !take_user_frames(ctx, e, head->header.pid, slot)) {
    if (*uses != mine) return false; /* the slot was taken meanwhile: the walk is not ours */
    send_copy(ctx, head, slot, with_user, with_kernel, with_runtime_frames);
    return true;
  }
  if (*uses != mine) return false;
  set_stack_head(&e->head, head, frames_payload());
  send_frames(ctx, e, slot, with_kernel, with_runtime_frames);
  return true;
}

/* Whether the task is inside execve after its old image is gone: in_execve is set for the
 * whole call, and once the new mm is in, the saved user sp lies in none of its mappings (it
 * pointed into the old stack). Before that point the old stack is still there to walk. */
static __noinline bool in_exec_without_user_stack(struct task_struct* task) {
  if (!bpf_core_field_exists(task->in_execve) || !BPF_CORE_READ_BITFIELD(task, in_execve))
    return false;
  struct pt_regs* regs = (struct pt_regs*)bpf_task_pt_regs(task);
  if (!regs || !BPF_CORE_READ(task, mm)) return false; /* read: see read_user_registers */
  struct stack_end found = {0};
  return bpf_find_vma(task, regs->sp, find_stack_end, &found, 0) != 0;
}

/* The stack event (`context`, in frames_scratch's `slot`) of a task
 * in_exec_without_user_stack: the exec pseudo-frame, then the kernel stack, in every --call-graph
 * mode. The interpreter's frames are gone with the image. */
static __noinline void send_exec_stack(void* ctx, struct task_struct* task, __u8 context,
                                       __u32 slot, __u8 state) {
  struct bpfprof_frames_event* e = bpf_map_lookup_elem(&frames_scratch, &slot);
  if (!e) return;
  stack_head(&e->head, task, context, state, 0);
  e->head.payload = frames_payload();
  e->ips[0] = BPFPROF_RAW_EXEC_FRAME;
  e->head.user_depth = 1;
  send_frames(ctx, e, slot, true, false);
}

/* A call a preemptible program sampled (an allocator's, an address-space system call's): the
 * caller's stacks in the tracepoints' slot, then the event `e` of `size` bytes (its header
 * first) saying what the call did, with the stack event's cpu, time and thread. The stack goes
 * first: a walk that was interrupted sends none, and the event after it still says what
 * happened. */
static __always_inline void send_sampled_call(void* ctx, void* e, __u64 size, __u8 context,
                                              __u32 kind, __u32 tgid) {
  struct bpfprof_stack_event_head head;
  stack_head(&head, bpf_get_current_task_btf(), context, 0, 0);
  send_stack(ctx, &head, TRACEPOINT_SLOT, true, false, true);
  struct bpfprof_event_header* header = e;
  *header = head.header;
  header->kind = kind;
  send_event(e, size, size, tgid);
}

#endif
