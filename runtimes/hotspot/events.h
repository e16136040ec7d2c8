/* What HotSpot's BPF reader (runtimes/hotspot/frames.bpf.h) and userspace share: the event
 * with a thread's frames, sent through the ring buffer as BPFPROF_EVENT_HOTSPOT_STACK, and the
 * entry of one process in its map. Plain C, fixed-size fields only. */
#ifndef BPFPROF_HOTSPOT_EVENTS_H
#define BPFPROF_HOTSPOT_EVENTS_H

#include "bpf/events.h"

/* HotSpot (Java) frames: the in-kernel walk steps through the JVM's code cache with the
 * JVM's own frame sizes (runtimes/hotspot/frames.bpf.h) and notes, for each Java frame it
 * walked, what names it. */
#define BPFPROF_MAX_HOTSPOT_FRAMES 256
#define BPFPROF_HOTSPOT_CODE_HEAPS 3
/* The bytes of a code blob's header read at once: every field the walk reads lies in it. */
#define BPFPROF_HOTSPOT_BLOB_WINDOW 256

enum bpfprof_hotspot_frame_kind {
  /* An interpreter frame: method is its Method*, aux its bytecode pointer. */
  BPFPROF_HOTSPOT_FRAME_INTERPRETED = 1,
  /* A blob with a frame size (compiled method, runtime stub): aux is the blob's address,
   * method the word at CompiledMethod::_method (a Method* where the blob is an nmethod). */
  BPFPROF_HOTSPOT_FRAME_COMPILED = 2,
  /* A blob without a frame size (stub routines, adapters), walked by rbp: aux is its name. */
  BPFPROF_HOTSPOT_FRAME_STUB = 3,
};

struct bpfprof_hotspot_frame {
  __u64 method;
  __u64 aux;
  __u32 pc_low; /* the frame's pc's low 32 bits, checked against the stack's in userspace */
  __u16 depth;  /* its index among the stack event's user frames */
  __u8 kind;    /* enum bpfprof_hotspot_frame_kind */
  __u8 reserved;
};

/* Only the used part of `frames` is sent. */
struct bpfprof_hotspot_stack_event {
  struct bpfprof_event_header header;
  __u32 count;
  __u32 dropped; /* Java frames walked past BPFPROF_MAX_HOTSPOT_FRAMES */
  struct bpfprof_hotspot_frame frames[BPFPROF_MAX_HOTSPOT_FRAMES];
};

/* One code heap: a blob is found from a pc through the heap's segment map, a byte per
 * segment (0: a block starts here; 0xff: free; else how many segments back to go). */
struct bpfprof_hotspot_code_heap {
  __u64 low;    /* CodeHeap::_memory._low: segment 0 */
  __u64 high;   /* the next heap's low, or the code cache's end */
  __u64 segmap; /* CodeHeap::_segmap._low */
};

/* What the walk needs of one JVM (userspace reads it from HotSpot's own tables): addresses
 * in the process, offsets in its structures. */
struct bpfprof_hotspot_process {
  __u64 code_low; /* CodeCache::_low_bound, _high_bound */
  __u64 code_high;
  __u64 interpreter_low; /* the interpreter's code (AbstractInterpreter::_code's buffer) */
  __u64 interpreter_high;
  struct bpfprof_hotspot_code_heap heaps[BPFPROF_HOTSPOT_CODE_HEAPS];
  __u32 heap_count;
  __u32 log2_segment_size;
  __u32 heap_block_size; /* sizeof(HeapBlock): the blob follows its block's header */
  __u32 heap_block_used; /* HeapBlock::Header::_used (a bool) */
  /* CodeBlob::_name, _frame_size (words), _frame_complete_offset (from _code_begin),
   * _code_begin, _code_end; CompiledMethod::_method: each below the window minus 8. */
  __u32 blob_name;
  __u32 blob_frame_size;
  __u32 blob_frame_complete;
  __u32 blob_code_begin;
  __u32 blob_code_end;
  __u32 compiled_method;
  /* An interpreter frame's Method*, bytecode pointer and sender's sp: bytes from its rbp. */
  __s32 interpreter_method;
  __s32 interpreter_bcp;
  __s32 interpreter_sender_sp;
  __u32 reserved;
};

#endif
