/* What V8's BPF reader (runtimes/v8/frames.bpf.h) and userspace share: the event
 * with a thread's frames, sent through the ring buffer as BPFPROF_EVENT_V8_STACK, and the
 * entry of one process in its map. Plain C, fixed-size fields only. */
#ifndef BPFPROF_V8_EVENTS_H
#define BPFPROF_V8_EVENTS_H

#include "bpf/events.h"

/* V8 (runtimes/v8/frames.bpf.h): for the frames of a kernel-walked stack that keep a frame
 * pointer of their own, the words V8 keeps at fixed offsets from it (v8dbg_off_fp_*), and the
 * function's SharedFunctionInfo read at the sample: JSFunctions are young objects that the
 * collector moves before userspace reads them (it reads up to a poll interval later), while
 * SharedFunctionInfos and BytecodeArrays live in old space. */
#define BPFPROF_MAX_V8_FRAMES 64
/* In bpfprof_v8_frame.depth: the leaf (anonymous code) was outside its frame, `function` read
 * from rdi, V8's register for the function called, or from the frame its `ret` just popped. */
#define BPFPROF_V8_FRAME_FROM_REGISTER 0x80000000u

struct bpfprof_v8_frame {
  __u64 shared;          /* the tagged SharedFunctionInfo of the frame's JSFunction, if JS */
  __u64 bytecode;        /* the word at fp + off_fp_bytecode_array (interpreted frames); 0 */
  __u32 depth;           /* the frame's index in the user stack, innermost 0; flags above */
  __s32 bytecode_offset; /* the Smi at fp + off_fp_bytecode_offset (interpreted frames); -1 */
};

/* Only the used part of `frames` is sent. */
struct bpfprof_v8_stack_event {
  struct bpfprof_event_header header;
  __u32 count;
  __u32 reserved;
  struct bpfprof_v8_frame frames[BPFPROF_MAX_V8_FRAMES];
};

/* A V8 process: its frame layout (v8dbg_off_fp_function, _bytecode_offset, _bytecode_array:
 * 0 where not exported) and where a JSFunction keeps its SharedFunctionInfo. */
struct bpfprof_v8_process {
  __s32 off_fp_function;
  __s32 off_fp_bytecode_offset;
  __s32 off_fp_bytecode_array;
  __u32 function_shared;
};

#endif
