/* Events sent from the BPF programs to userspace through the ring buffer.
 * Shared by bpf/profiler.bpf.c and userspace: plain C, fixed-size fields only. */
#ifndef BPFPROF_EVENTS_H
#define BPFPROF_EVENTS_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

#include "bpf/runtime_list.h"

/* perf's default kernel.perf_event_max_stack. */
#define BPFPROF_MAX_STACK_DEPTH 127

/* The only user "frame" of a sample taken inside execve once the old image is gone (the new
 * address space is in; the saved user registers still point into the old one, so there is
 * no user stack to walk or copy): a raw address no code has (not canonical), which the
 * model turns into the [exec] pseudo-frame. Userspace keeps Python frames at 1 << 60. */
#define BPFPROF_RAW_EXEC_FRAME (2ull << 60)

/* tracked_processes values. A command bpfprof launches is tracked from its fork, so that
 * nothing of it is missed, but until its exec it runs bpfprof's launcher: its samples and
 * switch-outs then get the exec pseudo-frame (above the kernel stack), not bpfprof's frames. */
#define BPFPROF_TRACKED 1
#define BPFPROF_TRACKED_AWAITING_EXEC 2
#define BPFPROF_COMM_LEN 16
#define BPFPROF_PATH_LEN 256

enum bpfprof_event_kind {
  /* A thread's stacks: a bpfprof_stack_event_head, whose `context` says when they were taken
   * and whose `payload` says in which form they follow. */
  BPFPROF_EVENT_STACK = 1,
  BPFPROF_EVENT_FORK = 2, /* a new thread or process */
  BPFPROF_EVENT_EXEC = 3,
  BPFPROF_EVENT_EXIT = 4,      /* a thread exits (group_dead: the last one of its process) */
  BPFPROF_EVENT_COMM = 5,      /* a thread was renamed (prctl, pthread_setname_np, exec) */
  BPFPROF_EVENT_SWITCH_IN = 6, /* a thread that left the CPU runs again (just the header) */
  /* A tracked thread is woken (sched_waking): who woke it (bpfprof_waking_event). */
  BPFPROF_EVENT_WAKING = 7,
/* A runtime's frames (bpf/runtime_list.h): BPFPROF_EVENT_<ID>_STACK. */
#define BPFPROF_RUNTIME_EVENT_KIND(ID, id, Kind, language, colour, event) \
  BPFPROF_EVENT_##ID##_STACK = event,
  BPFPROF_RUNTIME_LIST(BPFPROF_RUNTIME_EVENT_KIND)
#undef BPFPROF_RUNTIME_EVENT_KIND
};

/* The runtimes whose own frames the BPF side reads (runtimes/<name>/frames.bpf.h), as
 * indexes in bpf/runtime_list.h's order: userspace's RuntimeKind has the same values. */
enum bpfprof_runtime {
#define BPFPROF_RUNTIME_INDEX(ID, id, Kind, language, colour, event) BPFPROF_RUNTIME_##ID,
  BPFPROF_RUNTIME_LIST(BPFPROF_RUNTIME_INDEX)
#undef BPFPROF_RUNTIME_INDEX
      BPFPROF_RUNTIMES, /* how many */
};

/* When a stack event's stacks were taken. */
enum bpfprof_stack_context {
  BPFPROF_CONTEXT_SAMPLE = 1, /* a timer sample */
  /* The thread left the CPU (`state` says why). Without off-CPU stacks, or with its last ones
   * reused, no stack is taken: the event ends the thread's stretch on the CPU. */
  BPFPROF_CONTEXT_SWITCH_OUT = 2,
  /* The waker of the waking event just before it on the same CPU with the same timestamp
   * (header pid/tid: the waker's). */
  BPFPROF_CONTEXT_WAKER = 3,
};

/* The form in which a stack event's stacks follow its head: the call-graph mode's, in any
 * context. */
enum bpfprof_stack_payload {
  /* bpfprof_frames_event, user frames walked by frame pointers (--call-graph fp). */
  BPFPROF_PAYLOAD_FP_FRAMES = 1,
  /* bpfprof_frames_event, user frames walked in the kernel with the unwind tables up to a
   * thread root; a walk that cannot reach one sends a copy instead. */
  BPFPROF_PAYLOAD_UNWOUND_FRAMES = 2,
  /* bpfprof_copy_event: user registers and a stack copy, unwound in userspace. */
  BPFPROF_PAYLOAD_COPY = 3,
};

/* The largest user-stack copy per sample (--call-graph dwarf,SIZE), as perf allows. */
#define BPFPROF_MAX_STACK_COPY 65528
/* The copy buffer: one page more than the largest copy, so that the verifier can see that a
 * page-sized read at any offset below BPFPROF_MAX_STACK_COPY stays inside it. */
#define BPFPROF_STACK_BUFFER (65536 + 4096)
/* x86-64 user registers in DWARF numbering: rax rdx rcx rbx rsi rdi rbp rsp r8-r15, rip (16). */
#define BPFPROF_USER_REGS 17
#define BPFPROF_REG_BP 6
#define BPFPROF_REG_SP 7
#define BPFPROF_REG_IP 16

/* Why a thread left the CPU. */
enum bpfprof_off_cpu_state {
  BPFPROF_OFF_CPU_SLEEPING = 1,    /* interruptible sleep (or an idle kernel wait) */
  BPFPROF_OFF_CPU_IO_WAIT = 2,     /* uninterruptible sleep: D state */
  BPFPROF_OFF_CPU_WAITING_CPU = 3, /* preempted while runnable */
};

struct bpfprof_event_header {
  __u32 kind;
  __u32 cpu;
  __u64 timestamp_ns; /* CLOCK_MONOTONIC */
  __u32 pid;          /* tgid */
  __u32 tid;
};

/* The start of every stack event (BPFPROF_EVENT_STACK). */
struct bpfprof_stack_event_head {
  struct bpfprof_event_header header;
  __u64 cpu_time_ns; /* the thread's sum_exec_runtime so far (exact at a switch); waker: 0 */
  __u8 context;      /* enum bpfprof_stack_context */
  __u8 payload;      /* enum bpfprof_stack_payload */
  __u8 state;        /* BPFPROF_CONTEXT_SWITCH_OUT: enum bpfprof_off_cpu_state */
  __u8 flags;        /* BPFPROF_SWITCH_STACK_REUSED, BPFPROF_STACK_COPY_* */
  __u32 user_depth;  /* frames: the user frames in `ips`; a copy: 0 */
  /* The kernel frames: after the user ones in `ips`, or in `kernel_ips`. */
  __u32 kernel_depth;
  __u32 reserved;
};

/* The thread's stacks were captured less than a sampling interval ago: none was taken now
 * (walking stacks at every switch of a switch-heavy thread costs more than it tells), the
 * last one stands for this wait too. */
#define BPFPROF_SWITCH_STACK_REUSED 1u

/* The stack copy stopped at the configured size before the end of the stack mapping: frames
 * above it can only be unwound with a larger --call-graph dwarf,SIZE. */
#define BPFPROF_STACK_COPY_AT_LIMIT 2u
/* Some pages of the copy could not be read (left zeroed; never touched, or past the end of
 * the mapping when its end was unknown). */
#define BPFPROF_STACK_COPY_UNREADABLE 4u

/* The most user frames the in-kernel walk follows. A deeper stack (GCC's garbage collector
 * recurses thousands deep) is cut there: its innermost frames are sent, and the profile roots
 * them at [truncated]. A stack copy would give no more (userspace unwinds as many frames) for
 * ~50 KB a sample and half a millisecond of unwinding. The index is masked to this array's
 * bound (BPFPROF_UNWOUND_INDEX_MASK) for the verifier. */
#define BPFPROF_MAX_UNWOUND_FRAMES 1023
#define BPFPROF_UNWOUND_INDEX_MASK 0x3ff

/* BPFPROF_PAYLOAD_FP_FRAMES and _UNWOUND_FRAMES: `ips` holds user_depth user frames (the
 * innermost pc, then return addresses; walked in the kernel, the outermost one in the
 * thread's root function, and the pc interrupted by a signal and its trampoline's one byte
 * past the instruction, as a return address is), then kernel_depth kernel frames. Only the
 * used part is sent. */
struct bpfprof_frames_event {
  struct bpfprof_stack_event_head head;
  __u64 ips[BPFPROF_MAX_UNWOUND_FRAMES + BPFPROF_MAX_STACK_DEPTH];
};

/* BPFPROF_PAYLOAD_COPY: the thread's user registers (all of them: CFI rules may use any, e.g.
 * the PLT's rip-based CFA) and a copy of its user stack from sp, `stack_size` bytes: every
 * readable byte up to the end of the stack mapping, at most the configured size; then its
 * kernel stack. Only the used part of `stack` is sent. */
struct bpfprof_copy_event {
  struct bpfprof_stack_event_head head;
  __u64 user_regs[BPFPROF_USER_REGS]; /* DWARF numbering; all 0 without a user context */
  __u32 stack_size;
  __u32 stack_copy_limit;   /* the most bytes this copy could take (the process's size then) */
  __u32 stack_bytes_wanted; /* what it tried to copy: the limit, or less where the stack ends */
  __u32 reserved;
  __u64 kernel_ips[BPFPROF_MAX_STACK_DEPTH];
  __u8 stack[BPFPROF_STACK_BUFFER];
};

/* What a waking ran in. */
enum bpfprof_waker_context {
  BPFPROF_WAKER_TASK = 1, /* a thread, in process context: waker_pid/tid/comm */
  /* An interrupt handler (a timer's expiry: nanosleep, timeouts) or a softirq run after one
   * (network, RCU), whatever thread it interrupted; its kernel stack says which. */
  BPFPROF_WAKER_INTERRUPT = 2,
};

/* A stack event of the waker (BPFPROF_CONTEXT_WAKER) follows with the same cpu and time. */
#define BPFPROF_WAKER_STACK_FOLLOWS 1u
/* No stack taken: one was for this (waker, wakee) pair less than an interval ago, and stands
 * for this waking too. */
#define BPFPROF_WAKER_STACK_REUSED 2u
/* With BPFPROF_WAKER_STACK_FOLLOWS: the waker is a thread of a process that is not tracked,
 * its kernel stack only (the user stack cannot be walked without the process's unwind tables
 * and mappings). */
#define BPFPROF_WAKER_USER_STACK_SKIPPED 4u

/* header pid/tid: the woken thread; waker_* as the context says (0 and "" for interrupts). */
struct bpfprof_waking_event {
  struct bpfprof_event_header header;
  __u32 waker_pid;
  __u32 waker_tid;
  char waker_comm[BPFPROF_COMM_LEN];
  __u32 context; /* enum bpfprof_waker_context */
  __u32 flags;   /* BPFPROF_WAKER_* */
};

struct bpfprof_fork_event {
  struct bpfprof_event_header header; /* pid/tid: the parent */
  __u32 child_pid;
  __u32 child_tid;
  char child_comm[BPFPROF_COMM_LEN];
};

struct bpfprof_exec_event {
  struct bpfprof_event_header header;
  __u32 old_tid; /* a non-leader thread that execs takes over the leader's tid */
  __u32 euid;    /* the new image's effective user: who may write its perf map */
  char comm[BPFPROF_COMM_LEN];
  char filename[BPFPROF_PATH_LEN];
};

struct bpfprof_exit_event {
  struct bpfprof_event_header header;
  __u64 cpu_time_ns; /* final sum_exec_runtime of the thread */
  __s32 exit_code;   /* as in wait(2) status */
  __u32 group_dead;  /* 1 if this was the last thread of the process */
  char comm[BPFPROF_COMM_LEN];
};

struct bpfprof_comm_event {
  struct bpfprof_event_header header;
  char comm[BPFPROF_COMM_LEN];
};

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

/* Ruby (CRuby, runtimes/ruby/frames.bpf.h): a thread's control frames, innermost first. */
#define BPFPROF_MAX_RUBY_FRAMES 96

struct bpfprof_ruby_frame {
  __u64 iseq;  /* rb_iseq_t*; a cfunc frame's method entry (ep[-2]); `flags` says which */
  __u64 pc;    /* the next instruction of the frame's iseq */
  __u32 flags; /* ep[0]: VM_FRAME_MAGIC_* and VM_FRAME_FLAG_* */
  __u32 reserved;
};

/* Why no (or not all) Ruby frames were read for a sample of a Ruby process. */
enum bpfprof_ruby_stack_status {
  BPFPROF_RUBY_STACK_COMPLETE = 0,   /* read up to the end of the VM stack */
  BPFPROF_RUBY_STACK_NO_THREAD = 1,  /* the thread is no Ruby thread (yet, anymore) */
  BPFPROF_RUBY_STACK_UNREADABLE = 2, /* a read failed midway */
  BPFPROF_RUBY_STACK_AT_LIMIT = 3,   /* more than BPFPROF_MAX_RUBY_FRAMES */
};

/* Only the used part of `frames` is sent. */
struct bpfprof_ruby_stack_event {
  struct bpfprof_event_header header;
  __u32 depth;  /* frames, innermost first */
  __u32 status; /* enum bpfprof_ruby_stack_status */
  __u64 thread; /* the thread's rb_thread_t, 0 if not found: userspace reads its name */
  struct bpfprof_ruby_frame frames[BPFPROF_MAX_RUBY_FRAMES];
};

/* Where one Ruby process's threads are, and the offsets the walk reads (runtimes/ruby/layout.h). */
struct bpfprof_ruby_process {
  __u64 vm_pointer;          /* &ruby_current_vm_ptr */
  __u32 vm_main_ractor;      /* rb_vm_t.ractor.main_ractor */
  __u32 ractor_threads_head; /* rb_ractor_t.threads.set: a list of rb_thread_t */
  __u32 thread_native_id;    /* rb_thread_t.thread_id: pthread_self(), the FS base */
  __u32 thread_ec;           /* rb_thread_t.ec */
  __u32 ec_vm_stack;         /* rb_execution_context_t.vm_stack */
  __u32 ec_vm_stack_size;    /* .vm_stack_size, in words */
  __u32 ec_cfp;              /* .cfp */
  __u32 frame_pc;            /* rb_control_frame_t.pc */
  __u32 frame_iseq;          /* .iseq */
  __u32 frame_ep;            /* .ep */
  __u32 frame_size;          /* sizeof(rb_control_frame_t) */
  __u32 frame_magic_mask;    /* of ep[0]: VM_FRAME_MAGIC_MASK */
  __u32 frame_magic_cfunc;   /* VM_FRAME_MAGIC_CFUNC: a C method's frame */
  __u32 ep_method_entry;     /* bytes below ep of its method entry (ep[-2]) */
  __u32 reserved;
};

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

/* Userspace keeps a runtime's frames per thread by their event's header (runtimes/kit/
 * pending_stacks.h): every runtime's event begins with it. */
#ifdef __cplusplus
#define BPFPROF_STATIC_ASSERT static_assert
#else
#define BPFPROF_STATIC_ASSERT _Static_assert
#endif
#define BPFPROF_RUNTIME_EVENT_HEADER_FIRST(ID, id, Kind, language, colour, event)             \
  BPFPROF_STATIC_ASSERT(__builtin_offsetof(struct bpfprof_##id##_stack_event, header) == 0 && \
                            sizeof(((struct bpfprof_##id##_stack_event*)0)->frames) > 0,      \
                        "bpfprof_" #id                                                        \
                        "_stack_event begins with its header and ends with frames");
BPFPROF_RUNTIME_LIST(BPFPROF_RUNTIME_EVENT_HEADER_FIRST)
#undef BPFPROF_RUNTIME_EVENT_HEADER_FIRST

#endif
