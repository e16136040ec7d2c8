/* What CPython's BPF reader (runtimes/python/frames.bpf.h) and userspace share: the event
 * with a thread's frames, sent through the ring buffer as BPFPROF_EVENT_PYTHON_STACK, and the
 * entry of one process in its map. Plain C, fixed-size fields only. */
#ifndef BPFPROF_PYTHON_EVENTS_H
#define BPFPROF_PYTHON_EVENTS_H

#include "bpf/events.h"

/* Python (CPython) frames. */
#define BPFPROF_MAX_PYTHON_FRAMES 96

/* The frame was the first one run by its C-level call of the interpreter loop (3.11:
 * _PyInterpreterFrame.is_entry): the frames up to it belong to one native
 * _PyEval_EvalFrameDefault activation. */
#define BPFPROF_PYTHON_FRAME_ENTRY 1u
/* The frame is the interpreter loop's own marker of a C-level call (3.12+: owned by the C
 * stack, "<interpreter trampoline>"): the frames inside it belong to that activation. */
#define BPFPROF_PYTHON_FRAME_SHIM 2u

/* Where a thread's innermost frame hangs. */
enum bpfprof_python_frame_anchor {
  BPFPROF_PYTHON_FRAME_IN_CFRAME = 1, /* tstate->cframe->current_frame (3.11, 3.12) */
  BPFPROF_PYTHON_FRAME_IN_THREAD = 2, /* tstate->current_frame (3.13), tstate->frame (<= 3.10) */
};

/* How a version marks where each C-level call of the interpreter loop begins. */
enum bpfprof_python_entry_marking {
  BPFPROF_PYTHON_ENTRY_FLAG = 1,        /* a bool in the first frame of the call (3.11) */
  BPFPROF_PYTHON_ENTRY_SHIM_FRAME = 2,  /* a frame of its own whose owner byte says so (3.12) */
  BPFPROF_PYTHON_ENTRY_EVERY_FRAME = 3, /* each frame is a call of its own (3.10 and before) */
};

/* How a frame says where it is in its code. */
enum bpfprof_python_instruction_form {
  BPFPROF_PYTHON_INSTRUCTION_POINTER = 1,     /* prev_instr, a pointer into the code (3.11+) */
  BPFPROF_PYTHON_INSTRUCTION_LASTI_BYTES = 2, /* f_lasti, an int, in bytes (3.8, 3.9) */
  BPFPROF_PYTHON_INSTRUCTION_LASTI_UNITS = 3, /* f_lasti in 2-byte code units (3.10) */
};

/* What a thread state's thread_key field holds, to match the sampled thread against. */
enum bpfprof_python_thread_key {
  BPFPROF_PYTHON_THREAD_NATIVE_ID = 1, /* native_thread_id: the tid (3.11+) */
  /* thread_id: pthread_self(), which is the thread's FS base on x86-64 (3.10 and before) */
  BPFPROF_PYTHON_THREAD_PTHREAD_SELF = 2,
};

struct bpfprof_python_frame {
  __u64 code;        /* the PyCodeObject's address in the process */
  __u32 instruction; /* bytes from the code's first instruction to the current one */
  __s32 first_line;  /* co_firstlineno as the frame was read: checks a cached code object */
  __u32 flags;       /* BPFPROF_PYTHON_FRAME_* */
  __u32 reserved;
};

/* Why no (or not all) Python frames were read for a sample of a Python process. */
enum bpfprof_python_stack_status {
  BPFPROF_PYTHON_STACK_COMPLETE = 0,   /* read up to the outermost frame */
  BPFPROF_PYTHON_STACK_NO_THREAD = 1,  /* the thread has no PyThreadState (yet, anymore) */
  BPFPROF_PYTHON_STACK_UNREADABLE = 2, /* a read failed midway (frames freed, paged out) */
  BPFPROF_PYTHON_STACK_AT_LIMIT = 3,   /* more than BPFPROF_MAX_PYTHON_FRAMES */
};

/* Only the used part of `frames` is sent. */
struct bpfprof_python_stack_event {
  struct bpfprof_event_header header;
  __u32 depth;  /* frames, innermost first */
  __u32 status; /* enum bpfprof_python_stack_status */
  struct bpfprof_python_frame frames[BPFPROF_MAX_PYTHON_FRAMES];
};

/* What the BPF side needs to walk one process's Python frames: addresses in the process,
 * and the offsets of the fields it reads (from userspace's per-version table). */
struct bpfprof_python_process {
  __u64 runtime;                   /* &_PyRuntime */
  __u32 runtime_interpreters_head; /* _PyRuntimeState.interpreters.head */
  __u32 interpreter_threads_head;  /* PyInterpreterState.threads.head */
  __u32 thread_next;               /* PyThreadState.next */
  __u32 thread_native_id;          /* PyThreadState.native_thread_id, or .thread_id (thread_key) */
  __u32 thread_frame;              /* PyThreadState.cframe, or .current_frame (frame_anchor) */
  __u32 frame_anchor;              /* enum bpfprof_python_frame_anchor */
  __u32 cframe_current_frame;      /* with FRAME_IN_CFRAME: _PyCFrame.current_frame */
  __u32 frame_code;                /* _PyInterpreterFrame.f_code (PyFrameObject.f_code) */
  __u32 frame_previous;            /* .previous (.f_back) */
  __u32 frame_prev_instr;          /* .prev_instr, or PyFrameObject.f_lasti (instruction_form) */
  __u32 frame_entry;               /* .is_entry (a bool), or .owner (a char) */
  __u32 entry_marking;             /* enum bpfprof_python_entry_marking */
  __u32 shim_owner;                /* with ENTRY_SHIM_FRAME: the owner value of a shim */
  __u32 code_first_line;           /* PyCodeObject.co_firstlineno */
  __u32 code_instructions;         /* PyCodeObject.co_code_adaptive */
  __u32 instruction_form;          /* enum bpfprof_python_instruction_form of frame_prev_instr */
  __u32 thread_key;                /* enum bpfprof_python_thread_key */
};

#endif
