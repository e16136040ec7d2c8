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

/* The words at the start of a SharedFunctionInfo (map to script) and of a BytecodeArray (map
 * to its source position table): the same words at the same address mean the same object, so
 * userspace's cache of what it read at an address holds while they do. */
#define BPFPROF_V8_SHARED_HEADER_WORDS 5
#define BPFPROF_V8_BYTECODE_HEADER_WORDS 8

/* A digest of an object's header words, made the same way on both sides: the kernel sends
 * it with each frame, so that userspace checks its cache without reading the process. Never
 * 0, which says "not read". */
static inline __u64 bpfprof_v8_header_hash(const __u64* words, unsigned count) {
  __u64 hash = 0x6a09e667f3bcc909ull;
  for (unsigned i = 0; i < count && i < BPFPROF_V8_BYTECODE_HEADER_WORDS; ++i) {
    hash = (hash ^ words[i]) * 0x9e3779b97f4a7c15ull;
    hash ^= hash >> 29;
  }
  return hash | 1;
}

struct bpfprof_v8_frame {
  __u64 shared;          /* the tagged SharedFunctionInfo of the frame's JSFunction, if JS */
  __u64 bytecode;        /* the word at fp + off_fp_bytecode_array (interpreted frames); 0 */
  __u32 depth;           /* the frame's index in the user stack, innermost 0; flags above */
  __s32 bytecode_offset; /* the Smi at fp + off_fp_bytecode_offset (interpreted frames); -1 */
  __u64 shared_hash;     /* the SharedFunctionInfo's header at the sample; 0: not read */
  __u64 bytecode_hash;   /* the BytecodeArray's header, when `bytecode` is sent; 0: not read */
};

/* Only the used part of `frames` is sent. */
struct bpfprof_v8_stack_event {
  struct bpfprof_event_header header;
  __u32 count;
  __u32 reserved;
  struct bpfprof_v8_frame frames[BPFPROF_MAX_V8_FRAMES];
};

/* Where a V8 process keeps its interpreter's code: only frames there (interpreted functions')
 * or in anonymous code (JIT code's) are JavaScript functions'. It is two blocks of V8's
 * builtins (entry trampolines, bytecode handlers), and V8 may map a second copy of the
 * builtins from the binary near its JIT code (for short calls), and run that one. */
#define BPFPROF_V8_INTERPRETER_BLOCKS 2
#define BPFPROF_V8_INTERPRETER_RANGES 4
struct bpfprof_v8_code_range {
  __u64 start;
  __u64 end; /* 0: none */
};

/* A V8 process: its frame layout (v8dbg_off_fp_function, _bytecode_offset, _bytecode_array:
 * 0 where not exported), where a JSFunction keeps its SharedFunctionInfo, and its interpreter's
 * code; interpreter[0].end 0: not known (all frames that keep a frame pointer are looked at). */
struct bpfprof_v8_process {
  __s32 off_fp_function;
  __s32 off_fp_bytecode_offset;
  __s32 off_fp_bytecode_array;
  __u32 function_shared;
  struct bpfprof_v8_code_range interpreter[BPFPROF_V8_INTERPRETER_RANGES];
};

#endif
