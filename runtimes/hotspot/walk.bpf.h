/* The in-kernel walk through a JVM's code cache (HotSpot, x86-64): the walker reaches it by
 * the kind of the frame's mapping (bpf/runtime_code.h), from runtimes/kernel_side.bpf.h.
 * HotSpot's compiled code keeps no frame pointer and has no CFI, but each code blob knows its
 * frame size: a pc in the code cache is looked up in its code heap's segment map (as
 * CodeHeap::find_block_for does), the blob's header read, and the frame stepped by it:
 *   - a compiled method or runtime stub (frame size > 0): caller's sp = sp + frame size
 *     words, the return address just below it, the caller's rbp below that; a leaf that has
 *     not completed its frame yet (before frame_complete_offset) has its return address at sp;
 *   - the interpreter: rbp frames, the caller's sp kept in the frame (a compiled caller's
 *     unextended sp), the frame's Method* and bytecode pointer noted for naming;
 *   - stubs without a frame size (stub routines, the call stub, adapters): rbp frames; the
 *     call stub's caller is libjvm's C++ code, which its CFI rows carry on.
 * Each Java frame stepped through is noted in hotspot_walks' slot (sent by frames.bpf.h).
 * Every read is of the profiled process's memory: a blob that does not hold the pc, a free
 * block or a segment map that loops make the walk fall back, never a wrong step. */
#ifndef BPFPROF_HOTSPOT_WALK_H
#define BPFPROF_HOTSPOT_WALK_H

#include "vmlinux.h"

#include <bpf/bpf_helpers.h>

#include "bpf/events.h"
#include "bpf/frame_pointer_step.h"
#include "bpf/maps.h"
#include "bpf/runtime_code.h"
#include "bpf/stack_window.h"
#include "bpf/unwind_maps.h"
#include "bpf/unwind_walk.h"
#include "runtimes/hotspot/maps.bpf.h"

/* Segment-map hops to a block's start: JDK 17 keeps a hop at most 0xfe segments long and
 * fills a block's map so that a 1 MB blob is a few dozen hops away. */
#define HOTSPOT_SEGMAP_HOPS 48
#define HOTSPOT_SEGMAP_FREE 0xff
/* A frame larger than this (in words) is not one HotSpot makes: the blob is misread. */
#define HOTSPOT_MAX_FRAME_WORDS (1 << 16)

static __always_inline __u64 blob_word(const struct hotspot_walk* h, __u32 offset) {
  if (offset > BPFPROF_HOTSPOT_BLOB_WINDOW - 8) return 0;
  return *(const __u64*)(h->blob + offset);
}

static __always_inline __s32 blob_int(const struct hotspot_walk* h, __u32 offset) {
  if (offset > BPFPROF_HOTSPOT_BLOB_WINDOW - 4) return -1;
  return *(const __s32*)(h->blob + offset);
}

/* The blob holding pc, its header read into h->blob: its address, or 0. */
static __always_inline __u64 hotspot_find_blob(const struct bpfprof_hotspot_process* p,
                                               struct hotspot_walk* h, __u64 pc) {
  const struct bpfprof_hotspot_code_heap* heap = NULL;
  for (int i = 0; i < BPFPROF_HOTSPOT_CODE_HEAPS; i++)
    if (i < p->heap_count && p->heaps[i].low <= pc && pc < p->heaps[i].high) heap = &p->heaps[i];
  if (!heap) return 0;
  const __u32 shift = p->log2_segment_size & 31;
  __u64 segment = (pc - heap->low) >> shift;
  for (int i = 0; i < HOTSPOT_SEGMAP_HOPS; i++) {
    __u8 hop;
    if (bpf_probe_read_user(&hop, 1, (void*)(heap->segmap + segment)) ||
        hop == HOTSPOT_SEGMAP_FREE || hop > segment)
      return 0;
    if (hop) {
      segment -= hop;
      continue;
    }
    const __u64 block = heap->low + (segment << shift);
    __u8 used = 0;
    const __u64 blob = block + p->heap_block_size;
    if (bpf_probe_read_user(&used, 1, (void*)(block + p->heap_block_used)) || !used ||
        bpf_probe_read_user(h->blob, BPFPROF_HOTSPOT_BLOB_WINDOW, (void*)blob))
      return 0;
    return blob;
  }
  return 0;
}

/* Notes a Java frame for naming; past the event's room, only counted. */
static __always_inline void hotspot_note(struct hotspot_walk* h, __u32 depth, __u64 pc, __u8 kind,
                                         __u64 method, __u64 aux) {
  const __u32 count = h->event.count;
  if (count >= BPFPROF_MAX_HOTSPOT_FRAMES) {
    h->event.dropped += 1;
    return;
  }
  struct bpfprof_hotspot_frame* f = &h->event.frames[count & (BPFPROF_MAX_HOTSPOT_FRAMES - 1)];
  f->method = method;
  f->aux = aux;
  f->pc_low = (__u32)pc;
  f->depth = (__u16)depth;
  f->kind = kind;
  f->reserved = 0;
  h->event.count = count + 1;
}

/* An interpreter frame: an rbp frame whose sender's sp is kept in it. */
static __always_inline long hotspot_interpreter_step(struct unwind_walk* w,
                                                     const struct bpfprof_hotspot_process* p,
                                                     struct hotspot_walk* h, __u32 depth) {
  __u64 method = 0, bcp = 0, sender_sp = 0;
  if (!w->bp_known || w->bp < w->sp)
    return walk_stops(w, WALK_FALLBACK, BPFPROF_FALLBACK_FRAME_POINTER);
  if (read_stack_word(w, w->bp + p->interpreter_method, &method) ||
      read_stack_word(w, w->bp + p->interpreter_bcp, &bcp) ||
      read_stack_word(w, w->bp + p->interpreter_sender_sp, &sender_sp))
    return walk_stops(w, WALK_FALLBACK, BPFPROF_FALLBACK_READ);
  hotspot_note(h, depth, w->pc, BPFPROF_HOTSPOT_FRAME_INTERPRETED, method, bcp);
  const __u64 frame_end = w->bp + 16;
  const long stopped = frame_pointer_step(w);
  /* A compiled caller's frame starts at the sp it called with (before an adapter or the
   * interpreter extended it for locals): the sender's sp the frame keeps. */
  if (!stopped && sender_sp >= frame_end) w->sp = sender_sp;
  return stopped;
}

static __always_inline bool in_code_cache(const struct bpfprof_hotspot_process* p, __u64 pc) {
  return p->code_low <= pc && pc < p->code_high;
}

/* A blob with a frame size: no frame pointer needed. A leaf outside its frame (before it is
 * complete, or in its epilogue: popped, before its `ret`, where a small method's samples often
 * are) has its return address at sp. Compiled code is called only from code-cache code
 * (other methods, the interpreter's adapters, the call stub): a leaf whose frame would return
 * elsewhere is taken as outside its frame, if [sp] returns into the code cache. */
static __always_inline long hotspot_sized_step(struct unwind_walk* w,
                                               const struct bpfprof_hotspot_process* p,
                                               __u64 code_begin, __s32 frame_words,
                                               __s32 frame_complete, __u32 depth) {
  const bool leaf = depth == 0 && w->exact;
  __u64 return_address;
  w->bx_known = 0;
  if (!(leaf && frame_complete > 0 && w->pc < code_begin + frame_complete)) {
    const __u64 cfa = w->sp + (__u64)frame_words * 8;
    if (read_stack_word(w, cfa - 8, &return_address))
      return walk_stops(w, WALK_FALLBACK, BPFPROF_FALLBACK_READ);
    __u64 at_sp = 0;
    const bool outside = leaf && !in_code_cache(p, return_address) &&
                         !read_stack_word(w, w->sp, &at_sp) && in_code_cache(p, at_sp);
    if (outside) return walk_to_caller(w, w->sp + 8, at_sp);
    if (read_stack_word(w, cfa - 16, &w->bp))
      return walk_stops(w, WALK_FALLBACK, BPFPROF_FALLBACK_READ);
    w->bp_known = 1;
    return walk_to_caller(w, cfa, return_address);
  }
  if (read_stack_word(w, w->sp, &return_address))
    return walk_stops(w, WALK_FALLBACK, BPFPROF_FALLBACK_READ);
  return walk_to_caller(w, w->sp + 8, return_address);
}

/* One step through a frame whose pc lies in the JVM's code cache (hotspot_code_start), in
 * hotspot_walks' `slot` (SAMPLE_SLOT, TRACEPOINT_SLOT). 1 ends the walk, as walk_stops. */
static __always_inline long hotspot_step(struct unwind_walk* w, __u32 slot, __u32 depth) {
  slot &= 1;
  struct hotspot_walk* h = bpf_map_lookup_elem(&hotspot_walks, &slot);
  if (!h) return walk_stops(w, WALK_FALLBACK, BPFPROF_FALLBACK_UNMAPPED);
  const struct bpfprof_hotspot_process* p = &h->process;
  const __u64 pc = w->exact ? w->pc : w->pc - 1;
  if (p->interpreter_low <= pc && pc < p->interpreter_high)
    return hotspot_interpreter_step(w, p, h, depth);
  const __u64 blob = hotspot_find_blob(p, h, pc);
  if (!blob) return walk_stops(w, WALK_FALLBACK, BPFPROF_FALLBACK_UNKNOWN_ROW);
  const __u64 code_begin = blob_word(h, p->blob_code_begin);
  if (pc < code_begin || pc >= blob_word(h, p->blob_code_end))
    return walk_stops(w, WALK_FALLBACK, BPFPROF_FALLBACK_UNKNOWN_ROW);
  const __u64 name = blob_word(h, p->blob_name);
  const __s32 frame_words = blob_int(h, p->blob_frame_size);
  if (frame_words <= 0 || frame_words > HOTSPOT_MAX_FRAME_WORDS) {
    hotspot_note(h, depth, w->pc, BPFPROF_HOTSPOT_FRAME_STUB, 0, name);
    return frame_pointer_step(w);
  }
  hotspot_note(h, depth, w->pc, BPFPROF_HOTSPOT_FRAME_COMPILED, blob_word(h, p->compiled_method),
               blob);
  return hotspot_sized_step(w, p, code_begin, frame_words, blob_int(h, p->blob_frame_complete),
                            depth);
}

/* A walk of thread `tid` of process `tgid` in hotspot_walks' `slot` starts: if the process is
 * a JVM, its entry is kept for the walk, no Java frames are noted yet, and `code` is its code
 * cache. */
static __always_inline void hotspot_code_start(struct runtime_code* code, __u32 tgid, __u32 tid,
                                               __u32 slot) {
  if (!runtime_processes[BPFPROF_RUNTIME_HOTSPOT]) return;
  const struct bpfprof_hotspot_process* p = bpf_map_lookup_elem(&hotspot_processes, &tgid);
  if (!p) return;
  slot &= 1;
  struct hotspot_walk* h = bpf_map_lookup_elem(&hotspot_walks, &slot);
  if (!h) return;
  h->process = *p;
  h->tid = tid;
  h->event.count = 0;
  h->event.dropped = 0;
  runtime_code_add(code, p->code_low, p->code_high);
  code->runtime = BPFPROF_RUNTIME_HOTSPOT;
}

#endif
