/* V8 (Node.js) frames: JavaScript functions are named in userspace from the JSFunction that
 * each JS frame keeps at a fixed offset from its frame pointer (v8dbg_off_fp_function), a
 * word that exists only while the frame does. So for a stack walked in the kernel of a
 * process that userspace registered as V8, each frame that keeps a frame pointer of its own
 * (its rbp differs from its caller's: native code without one shares its caller's) sends its
 * function's SharedFunctionInfo (the JSFunction itself may have moved by the time userspace
 * reads it), and for an interpreted frame its BytecodeArray and bytecode offset, in an event
 * just before the sample. Userspace checks every word (an object whose map says what it is)
 * before naming it; with each object the digest of its header words at the sample, which
 * userspace checks its cache of names and lines by without reading the process again. Its
 * maps are here, its event in runtimes/v8/events.h. */
#ifndef BPFPROF_V8_FRAMES_H
#define BPFPROF_V8_FRAMES_H

#include "vmlinux.h"

#include <bpf/bpf_helpers.h>

#include "bpf/events.h"
#include "bpf/helpers.h"
#include "bpf/maps.h"
#include "runtimes/v8/events.h"

/* V8 (runtimes/v8/frames.bpf.h). */

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

#define V8_NO_BYTECODE_OFFSET 0xffffffff00000000ull /* -1 in the upper half */

/* Frames looked at: the innermost ones, where a sample's JavaScript is. */
#define V8_MAX_FRAMES_LOOKED_AT 256

struct v8_frame_scan {
  const struct bpfprof_v8_process* process;
  struct unwind_walk* walk;
  const __u64* ips; /* the walked stack's */
  struct bpfprof_v8_stack_event* event;
  __u32 depth; /* the walked stack's */
};

/* V8's JIT code opens a function's frame with push rbp; mov rbp, rsp (55 48 89 e5), after a
 * few instructions that check the code was not deoptimized. True when `pc` is before that
 * mov: the frame is not set up yet. */
static __always_inline bool v8_before_frame(__u64 pc) {
  __u8 code[20];
  if (bpf_probe_read_user(code, sizeof(code), (void*)(pc - 1))) return false;
  for (int k = 0; k <= 16; ++k)
    if (code[k] == 0x55 && code[k + 1] == 0x48 && code[k + 2] == 0x89 && code[k + 3] == 0xe5)
      return true;
  return false;
}

/* The function of the leaf in JIT code sampled outside its frame (rbp is still or again its
 * caller's, whose frame slots would name the caller): before the frame is set up, the
 * function called is in rdi, V8's register for it; at its `ret`, after `pop rbp`, the frame
 * just popped still lies below rsp (interrupts do not write the user stack), its saved rbp at
 * rsp - 8 and its function slot below that. False when the leaf is inside its frame. */
static __always_inline bool v8_leaf_outside_frame(const struct v8_frame_scan* s, __u64 bp,
                                                  __u64* function) {
  struct pt_regs* regs = (struct pt_regs*)bpf_task_pt_regs(bpf_get_current_task_btf());
  if (!regs) return false;
  const __u64 pc = regs->ip;
  const __u64 sp = regs->sp;
  __u8 op = 0;
  if (bpf_probe_read_user(&op, sizeof(op), (void*)pc)) return false;
  if (op == 0xc3 || op == 0xc2) { /* ret, ret imm16 */
    __u64 saved_bp = 0;
    *function = 0;
    if (!bpf_probe_read_user(&saved_bp, sizeof(saved_bp), (void*)(sp - 8)) && saved_bp == bp)
      bpf_probe_read_user(function, sizeof(*function),
                          (void*)(sp - 8 + s->process->off_fp_function));
    return true;
  }
  if (!v8_before_frame(pc)) return false;
  *function = s->walk->leaf_di;
  return true;
}

/* The words just below a frame pointer, where V8 keeps a frame's slots (node 16-26: 16 to 40
 * bytes down): one read for them instead of one each. */
#define V8_WINDOW_WORDS 8
struct v8_frame_window {
  __u64 words[V8_WINDOW_WORDS];
  __u64 low;   /* the address of words[0] */
  __u32 count; /* words read */
};

static __always_inline void v8_read_window(struct v8_frame_window* w, __u64 bp) {
  w->low = bp - sizeof(w->words);
  w->count = bpf_probe_read_user(w->words, sizeof(w->words), (void*)w->low) ? 0 : V8_WINDOW_WORDS;
}

/* The word at bp + offset: from the window, else read on its own; `otherwise` if unreadable. */
static __always_inline __u64 v8_frame_slot(const struct v8_frame_window* w, __u64 bp, __s32 offset,
                                           __u64 otherwise) {
  const __u64 at = bp + offset;
  const __u64 index = (at - w->low) / 8;
  if (at >= w->low && index < w->count) return w->words[index & (V8_WINDOW_WORDS - 1)];
  __u64 value = otherwise;
  if (bpf_probe_read_user(&value, sizeof(value), (void*)at)) value = otherwise;
  return value;
}

/* The JSFunction of frame `index`, and its bytecode array and offset slots. 0: none. */
static __always_inline __u64 v8_frame_function(const struct v8_frame_scan* s, __u32 index,
                                               __u64* bytecode_offset, __u64* bytecode,
                                               __u32* flags) {
  const __u64 word = s->walk->frame_bp[index & BPFPROF_UNWOUND_INDEX_MASK];
  const __u64 bp = word & ~FRAME_BP_ANONYMOUS_CODE;
  const __u64 caller_bp =
      s->walk->frame_bp[(index + 1) & BPFPROF_UNWOUND_INDEX_MASK] & ~FRAME_BP_ANONYMOUS_CODE;
  __u64 function = 0;
  *flags = 0;
  if (index == 0 && (word & FRAME_BP_ANONYMOUS_CODE) && v8_leaf_outside_frame(s, bp, &function)) {
    *flags = BPFPROF_V8_FRAME_FROM_REGISTER;
  } else if (bp && bp != caller_bp) {
    struct v8_frame_window window;
    v8_read_window(&window, bp);
    function = v8_frame_slot(&window, bp, s->process->off_fp_function, 0);
    *bytecode_offset =
        v8_frame_slot(&window, bp, s->process->off_fp_bytecode_offset, *bytecode_offset);
    /* Only an interpreted frame (its pc in V8's interpreter, not JIT code) keeps the offset
     * there, as a Smi (upper half); -1 for the others. The interpreter writes the slot when a
     * bytecode calls out, so it is the frame's current bytecode only in a frame that is
     * calling (a return address). The leaf's pc is in code running on the frame without one
     * of its own: a bytecode handler (the slot holds the last bytecode that called out), or a
     * builtin called from code that entered the frame by on-stack replacement (the slot holds
     * the loop's back edge where it entered): the leaf keeps its function's first line. */
    if (index == 0 || (word & FRAME_BP_ANONYMOUS_CODE) || (__u32)*bytecode_offset)
      *bytecode_offset = V8_NO_BYTECODE_OFFSET;
    else if (s->process->off_fp_bytecode_array)
      *bytecode = v8_frame_slot(&window, bp, s->process->off_fp_bytecode_array, 0);
  }
  return function & 1 ? function : 0; /* a tagged heap object, or no JS frame */
}

/* The digest of the first `words` words of the heap object `object` (tagged); 0: unreadable. */
static __always_inline __u64 v8_header_hash(__u64 object, __u32 words) {
  __u64 header[BPFPROF_V8_BYTECODE_HEADER_WORDS];
  if (words > BPFPROF_V8_BYTECODE_HEADER_WORDS ||
      bpf_probe_read_user(header, words * sizeof(__u64), (void*)(object - 1)))
    return 0;
  return bpfprof_v8_header_hash(header, words);
}

/* A return address may be the end of a block. */
static __always_inline bool v8_in_interpreter(const struct bpfprof_v8_process* p, __u64 pc) {
  for (int i = 0; i < BPFPROF_V8_INTERPRETER_RANGES; ++i)
    if (p->interpreter[i].start <= pc && pc <= p->interpreter[i].end) return true;
  return false;
}

static long read_v8_frame(__u64 index, void* context) {
  struct v8_frame_scan* s = context;
  struct bpfprof_v8_stack_event* e = s->event;
  if (index + 1 >= s->depth || e->count >= BPFPROF_MAX_V8_FRAMES) return 1;
  /* Other code's frames (native code's own frame pointer's slots hold anything; builtins'
   * frames are no script's) are skipped where the interpreter's code is known: reading
   * through them was ~4 us of a node 20 sample's 18 in the kernel. */
  const __u32 at = (__u32)index & BPFPROF_UNWOUND_INDEX_MASK;
  const __u64 pc = s->ips[at];
  if (s->process->interpreter[0].end && !(s->walk->frame_bp[at] & FRAME_BP_ANONYMOUS_CODE) &&
      !v8_in_interpreter(s->process, pc))
    return 0;
  __u64 bytecode_offset = V8_NO_BYTECODE_OFFSET;
  __u64 bytecode = 0;
  __u32 flags = 0;
  const __u64 function = v8_frame_function(s, (__u32)index, &bytecode_offset, &bytecode, &flags);
  __u64 shared = 0;
  if (!function || bpf_probe_read_user(&shared, sizeof(shared),
                                       (void*)(function - 1 + s->process->function_shared)))
    return 0;
  if (!(shared & 1)) return 0;
  /* A recursion repeats its function (and bytecode) frame after frame: read them once. */
  const struct bpfprof_v8_frame* before =
      e->count ? &e->frames[(e->count - 1) & (BPFPROF_MAX_V8_FRAMES - 1)] : NULL;
  struct bpfprof_v8_frame* f = &e->frames[e->count & (BPFPROF_MAX_V8_FRAMES - 1)];
  f->shared_hash = before && before->shared == shared
                       ? before->shared_hash
                       : v8_header_hash(shared, BPFPROF_V8_SHARED_HEADER_WORDS);
  f->bytecode_hash = !bytecode ? 0
                     : before && before->bytecode == bytecode
                         ? before->bytecode_hash
                         : v8_header_hash(bytecode, BPFPROF_V8_BYTECODE_HEADER_WORDS);
  f->shared = shared;
  f->bytecode = bytecode;
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
  const struct bpfprof_frames_event* frames = bpf_map_lookup_elem(&frames_scratch, &slot);
  if (!e || !w || !frames) return;
  e->header = *header;
  e->header.kind = BPFPROF_EVENT_V8_STACK;
  e->count = 0;
  e->reserved = 0;
  struct v8_frame_scan s = {
      .process = p, .walk = w, .ips = frames->ips, .event = e, .depth = w->depth};
  bpf_loop(V8_MAX_FRAMES_LOOKED_AT, read_v8_frame, &s, 0);
  if (!e->count) return;
  const __u64 count = e->count > BPFPROF_MAX_V8_FRAMES ? BPFPROF_MAX_V8_FRAMES : e->count;
  send_event(
      e, offsetof(struct bpfprof_v8_stack_event, frames) + count * sizeof(struct bpfprof_v8_frame),
      sizeof(*e), header->pid);
}

#endif
