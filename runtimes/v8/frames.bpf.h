/* V8 (Node.js) frames: JavaScript functions are named in userspace from the JSFunction that
 * each JS frame keeps at a fixed offset from its frame pointer (v8dbg_off_fp_function), a
 * word that exists only while the frame does. So for a stack walked in the kernel of a
 * process that userspace registered as V8, each frame that keeps a frame pointer of its own
 * (its rbp differs from its caller's: native code without one shares its caller's) sends that
 * word, with the interpreter's bytecode offset slot, in an event just before the sample.
 * Userspace checks every word (a JSFunction whose map says so) before naming it. */
#ifndef BPFPROF_V8_FRAMES_H
#define BPFPROF_V8_FRAMES_H

#include "vmlinux.h"

#include <bpf/bpf_helpers.h>

#include "bpf/events.h"
#include "bpf/helpers.h"
#include "bpf/maps.h"

/* tgid -> its frame layout; userspace fills it for processes that export V8's v8dbg_ tables. */
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 4096);
  __type(key, __u32);
  __type(value, struct bpfprof_v8_process);
} v8_processes SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct bpfprof_v8_stack_event);
} v8_scratch SEC(".maps");

/* Frames looked at: the innermost ones, where a sample's JavaScript is. */
#define V8_MAX_FRAMES_LOOKED_AT 256

struct v8_frame_scan {
  const struct bpfprof_v8_process* process;
  struct unwind_walk* walk;
  struct bpfprof_v8_stack_event* event;
  __u32 depth; /* the walked stack's */
};

/* The JSFunction of frame `index`, and its bytecode offset slot; the leaf in JIT code before
 * its frame is set up (its rbp is its caller's) has its function in rdi. 0: none. */
static __always_inline __u64 v8_frame_function(const struct v8_frame_scan* s, __u32 index,
                                               __u64* bytecode_offset, __u32* flags) {
  const __u64 word = s->walk->frame_bp[index & BPFPROF_UNWOUND_INDEX_MASK];
  const __u64 bp = word & ~FRAME_BP_ANONYMOUS_CODE;
  const __u64 caller_bp =
      s->walk->frame_bp[(index + 1) & BPFPROF_UNWOUND_INDEX_MASK] & ~FRAME_BP_ANONYMOUS_CODE;
  __u64 function = 0;
  *flags = 0;
  if (bp && bp != caller_bp) {
    if (bpf_probe_read_user(&function, sizeof(function), (void*)(bp + s->process->off_fp_function)))
      return 0;
    bpf_probe_read_user(bytecode_offset, sizeof(*bytecode_offset),
                        (void*)(bp + s->process->off_fp_bytecode_offset));
  } else if (index == 0 && (word & FRAME_BP_ANONYMOUS_CODE)) {
    function = s->walk->leaf_di;
    *flags = BPFPROF_V8_FRAME_FROM_REGISTER;
  }
  return function & 1 ? function : 0; /* a tagged heap object, or no JS frame */
}

static long read_v8_frame(__u64 index, void* context) {
  struct v8_frame_scan* s = context;
  struct bpfprof_v8_stack_event* e = s->event;
  if (index + 1 >= s->depth || e->count >= BPFPROF_MAX_V8_FRAMES) return 1;
  __u64 bytecode_offset = 0;
  __u32 flags = 0;
  const __u64 function = v8_frame_function(s, (__u32)index, &bytecode_offset, &flags);
  if (!function) return 0;
  struct bpfprof_v8_frame* f = &e->frames[e->count & (BPFPROF_MAX_V8_FRAMES - 1)];
  f->function = function;
  f->depth = (__u32)index | flags;
  f->bytecode_offset = (__s32)(bytecode_offset >> 32); /* a Smi: the value in the upper half */
  e->count += 1;
  return 0;
}

/* `walked`: the stack event's user frames were walked in the kernel from walk slot `slot`
 * (the frames' rbp values are there); a copy unwound in userspace has none. */
static __always_inline void send_v8_stack(const struct bpfprof_event_header* header, __u32 slot,
                                          bool walked) {
  if (!walked || !runtime_processes[BPFPROF_RUNTIME_V8]) return;
  const struct bpfprof_v8_process* p = bpf_map_lookup_elem(&v8_processes, &header->pid);
  if (!p) return;
  __u32 zero = 0;
  slot &= 1;
  struct bpfprof_v8_stack_event* e = bpf_map_lookup_elem(&v8_scratch, &zero);
  struct unwind_walk* w = bpf_map_lookup_elem(&unwind_walks, &slot);
  if (!e || !w) return;
  e->header = *header;
  e->header.kind = BPFPROF_EVENT_V8_STACK;
  e->count = 0;
  e->reserved = 0;
  struct v8_frame_scan s = {.process = p, .walk = w, .event = e, .depth = w->depth};
  bpf_loop(V8_MAX_FRAMES_LOOKED_AT, read_v8_frame, &s, 0);
  if (!e->count) return;
  const __u64 count = e->count > BPFPROF_MAX_V8_FRAMES ? BPFPROF_MAX_V8_FRAMES : e->count;
  send_event(
      e, offsetof(struct bpfprof_v8_stack_event, frames) + count * sizeof(struct bpfprof_v8_frame),
      sizeof(*e), header->pid);
}

#endif
