/* Python frames: for a process that userspace registered as a CPython interpreter, each
 * sample (and each off-CPU stack) is preceded by an event with the thread's Python frames,
 * read from the interpreter's own structures: the code object's address and the offset of
 * the current instruction per frame, innermost first, and which frames begin a C-level call
 * of the interpreter loop (so that userspace can put them in place of the native
 * _PyEval_EvalFrameDefault frames). Userspace names the code objects. Its maps are
 * here, its event in runtimes/python/events.h. */
#ifndef BPFPROF_PYTHON_FRAMES_H
#define BPFPROF_PYTHON_FRAMES_H

#include "vmlinux.h"

#include <bpf/bpf_helpers.h>

#include "bpf/events.h"
#include "bpf/helpers.h"
#include "bpf/maps.h"
#include "runtimes/python/events.h"

/* Python (runtimes/python/frames.bpf.h). */

/* The interpreters: tgid -> where their state is and how it is laid out (userspace fills it
 * when it sees a python3.X / libpython3.X mapping of a known version). */
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 4096);
  __type(key, __u32); /* tgid */
  __type(value, struct bpfprof_python_process);
} python_processes SEC(".maps");

/* Each thread's PyThreadState as last found, checked on every use against its
 * native_thread_id (thread_id before 3.11): finding it walks the interpreter's thread list. */
struct {
  __uint(type, BPF_MAP_TYPE_LRU_HASH);
  __uint(max_entries, 65536);
  __type(key, __u32);   /* tid */
  __type(value, __u64); /* PyThreadState* in the thread's process */
} python_thread_states SEC(".maps");

/* The frame header is read in one piece into `window` (one read per frame instead of four);
 * the fields are taken from it at the offsets of the process's version (the last, 3.6's
 * f_lasti, ends at 124). */
#define PYTHON_FRAME_WINDOW 128

struct python_scratch {
  struct bpfprof_python_stack_event event;
  __u8 window[PYTHON_FRAME_WINDOW];
};

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct python_scratch);
} python_scratch_space SEC(".maps");

/* A bound for the thread-list walk: threads beyond it get no Python frames. */
#define PYTHON_MAX_THREADS 512

struct python_thread_search {
  const struct bpfprof_python_process* process;
  __u64 thread_state; /* the one being looked at; the answer when found */
  __u64 key;          /* the thread's tid or pthread_self() (thread_key) */
  bool found;
};

/* What the current thread's state holds in its thread_native_id field: its tid as gettid()
 * gave it, in its own pid namespace (a container's), or (3.10 and before, which keep no native
 * id) pthread_self(), glibc's and musl's thread pointer, which is the FS base on x86-64 (set at
 * clone and by arch_prctl, both kept in thread.fsbase). */
static __always_inline __u64 python_thread_key(const struct bpfprof_python_process* p) {
  if (p->thread_key == BPFPROF_PYTHON_THREAD_NATIVE_ID) return current_namespace_tid();
  return current_thread_pointer();
}

static long check_python_thread(__u64 index, void* context) {
  struct python_thread_search* s = context;
  if (!s->thread_state) return 1;
  if (read_user_word(s->thread_state + s->process->thread_native_id) == s->key) {
    s->found = true;
    return 1;
  }
  s->thread_state = read_user_word(s->thread_state + s->process->thread_next);
  return 0;
}

/* The PyThreadState of thread `tid` of the current process, or 0. 3.11 keeps only the GIL
 * holder's state in _PyRuntime, and a thread that runs without the GIL (hashing a large
 * buffer, in a C extension) is sampled too: so each thread's state is found in the
 * interpreter's list by its native_thread_id, and remembered. */
static __always_inline __u64 python_thread_state(const struct bpfprof_python_process* p,
                                                 __u32 tid) {
  const __u64 key = python_thread_key(p);
  if (!key) return 0;
  __u64* cached = bpf_map_lookup_elem(&python_thread_states, &tid);
  if (cached && *cached && read_user_word(*cached + p->thread_native_id) == key) return *cached;
  __u64 interpreter = read_user_word(p->runtime + p->runtime_interpreters_head);
  if (!interpreter) return 0;
  struct python_thread_search s = {
      .process = p,
      .thread_state = read_user_word(interpreter + p->interpreter_threads_head),
      .key = key,
      .found = false,
  };
  bpf_loop(PYTHON_MAX_THREADS, check_python_thread, &s, 0);
  if (!s.found) return 0;
  bpf_map_update_elem(&python_thread_states, &tid, &s.thread_state, BPF_ANY);
  return s.thread_state;
}

struct python_frame_walk {
  const struct bpfprof_python_process* process;
  struct python_scratch* scratch;
  __u64 frame; /* the next _PyInterpreterFrame (PyFrameObject) to read; 0 after the outermost */
};

static __always_inline bool window_u64(struct python_scratch* s, __u32 offset, __u64* value) {
  if (offset > PYTHON_FRAME_WINDOW - sizeof(__u64)) return false;
  *value = *(__u64*)(s->window + offset);
  return true;
}

/* Bytes from the code's first instruction to the frame's current one (negative before the
 * first: f_lasti is -1 then), in whichever form the version keeps it. */
static __always_inline bool frame_instruction(struct python_scratch* s,
                                              const struct bpfprof_python_process* p, __u64 code,
                                              __u32* instruction) {
  __u32 offset = p->frame_prev_instr;
  if (p->instruction_form == BPFPROF_PYTHON_INSTRUCTION_POINTER) {
    __u64 prev_instr = 0;
    if (!window_u64(s, offset, &prev_instr)) return false;
    *instruction = (__u32)(prev_instr - (code + p->code_instructions));
    return true;
  }
  if (offset > PYTHON_FRAME_WINDOW - sizeof(__s32)) return false;
  const __s32 lasti = *(__s32*)(s->window + offset);
  *instruction =
      (__u32)(p->instruction_form == BPFPROF_PYTHON_INSTRUCTION_LASTI_UNITS ? lasti * 2 : lasti);
  return true;
}

static long read_python_frame(__u64 index, void* context) {
  struct python_frame_walk* w = context;
  struct bpfprof_python_stack_event* e = &w->scratch->event;
  if (!w->frame) return 1; /* status stays COMPLETE */
  if (index >= BPFPROF_MAX_PYTHON_FRAMES) {
    e->status = BPFPROF_PYTHON_STACK_AT_LIMIT;
    return 1;
  }
  const struct bpfprof_python_process* p = w->process;
  __u64 code = 0, previous = 0;
  __u32 instruction = 0;
  __u32 entry_offset = p->frame_entry;
  if (bpf_probe_read_user(w->scratch->window, PYTHON_FRAME_WINDOW, (void*)w->frame) ||
      !window_u64(w->scratch, p->frame_code, &code) ||
      !window_u64(w->scratch, p->frame_previous, &previous) ||
      !frame_instruction(w->scratch, p, code, &instruction) ||
      entry_offset >= PYTHON_FRAME_WINDOW || !code) {
    e->status = BPFPROF_PYTHON_STACK_UNREADABLE;
    return 1;
  }
  struct bpfprof_python_frame* f = &e->frames[index];
  f->code = code;
  f->instruction = instruction;
  f->first_line = 0;
  bpf_probe_read_user(&f->first_line, sizeof(f->first_line), (void*)(code + p->code_first_line));
  const __u8 entry = w->scratch->window[entry_offset];
  if (p->entry_marking == BPFPROF_PYTHON_ENTRY_SHIM_FRAME)
    f->flags = entry == p->shim_owner ? BPFPROF_PYTHON_FRAME_SHIM : 0;
  else if (p->entry_marking == BPFPROF_PYTHON_ENTRY_EVERY_FRAME)
    f->flags = BPFPROF_PYTHON_FRAME_ENTRY;
  else
    f->flags = entry ? BPFPROF_PYTHON_FRAME_ENTRY : 0;
  f->reserved = 0;
  e->depth = index + 1;
  w->frame = previous;
  return 0;
}

/* Sends the Python frames of the current task (`tid` of `tgid`) with the header of the stack
 * event that follows; nothing for a process that is not a known interpreter. `slot` and `walked`
 * (the native walk) are not needed: the frames are read from the thread's own state. */
static __always_inline void send_python_stack(const struct bpfprof_event_header* sample, __u32 slot,
                                              bool walked) {
  (void)slot;
  (void)walked;
  __u32 tgid = sample->pid;
  if (!runtime_processes[BPFPROF_RUNTIME_PYTHON]) return;
  const struct bpfprof_python_process* p = bpf_map_lookup_elem(&python_processes, &tgid);
  if (!p) return;
  __u32 zero = 0;
  struct python_scratch* s = bpf_map_lookup_elem(&python_scratch_space, &zero);
  if (!s) return;
  struct bpfprof_python_stack_event* e = &s->event;
  e->header = *sample;
  e->header.kind = BPFPROF_EVENT_PYTHON_STACK;
  e->depth = 0;
  e->status = BPFPROF_PYTHON_STACK_COMPLETE;
  __u64 thread_state = python_thread_state(p, sample->tid);
  __u64 frame = thread_state ? read_user_word(thread_state + p->thread_frame) : 0;
  if (frame && p->frame_anchor == BPFPROF_PYTHON_FRAME_IN_CFRAME)
    frame = read_user_word(frame + p->cframe_current_frame);
  struct python_frame_walk w = {.process = p, .scratch = s, .frame = frame};
  if (!thread_state)
    e->status = BPFPROF_PYTHON_STACK_NO_THREAD;
  else
    bpf_loop(BPFPROF_MAX_PYTHON_FRAMES + 1, read_python_frame, &w, 0);
  send_event(e,
             offsetof(struct bpfprof_python_stack_event, frames) +
                 (__u64)e->depth * sizeof(struct bpfprof_python_frame),
             sizeof(*e), tgid);
}

#endif
