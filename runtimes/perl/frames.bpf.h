/* Perl frames: for a process that userspace registered as a threaded perl, each sample (and
 * off-CPU stack) is preceded by an event with the thread's Perl frames: its interpreter
 * (my_perl, a thread-local), from the current statement (PL_curcop) out along each runlevel's
 * context stack (PL_curstackinfo, si_prev outward), a frame for each sub, format, eval and
 * require, each with the statement it was running, then the file-level code; an XSUB being
 * called (it pushes no context) as the innermost. Userspace names them and puts them in place
 * of the native Perl_runops_standard frames (BPFPROF_PERL_FROM_C marks where each begins).
 * Its maps are here, its event in runtimes/perl/events.h. */
#ifndef BPFPROF_PERL_FRAMES_H
#define BPFPROF_PERL_FRAMES_H

#include "vmlinux.h"

#include <bpf/bpf_helpers.h>

#include "bpf/events.h"
#include "bpf/helpers.h"
#include "bpf/maps.h"
#include "runtimes/perl/events.h"

/* tgid -> where its threads' interpreters are and how its structures are laid out. */
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 4096);
  __type(key, __u32);
  __type(value, struct bpfprof_perl_process);
} perl_processes SEC(".maps");

/* Contexts looked at in a walk (loops and blocks among them), and runlevels. */
#define PERL_MAX_CONTEXTS 512
#define PERL_MAX_RUNLEVELS 8
/* cop.h: context types, flags, and the runlevel of a sort block */
#define PERL_CX_TYPE_MASK 0xf
#define PERL_CX_SUB 9
#define PERL_CX_FORMAT 10
#define PERL_CX_EVAL 11
#define PERL_CX_SUB_RE_FAKE 0x80
#define PERL_CX_EVAL_REAL 0x20
#define PERL_CX_EVAL_BLOCK 0x40
#define PERL_SI_SORT 3
#define PERL_SI_MULTICALL 10
#define PERL_SVT_MASK 0x1f
#define PERL_SVT_PVCV 13
/* The bytes of a context read at once: every field the walk takes lies in them (0x60 in
 * 5.36), and of a runlevel (PERL_SI) up to si_type. */
#define PERL_CX_WINDOW_WORDS 12
#define PERL_SI_WINDOW_WORDS 6

/* A walk: the process's entry, where it is, and the event it fills (per CPU). Its steps are
 * global functions on it: the verifier checks each once, not once per path that reaches it. */
struct perl_reading {
  struct bpfprof_perl_process process;
  __u64 cop;     /* the statement the next frame was running */
  __u64 si;      /* the runlevel being read */
  __u64 cxstack; /* its contexts */
  __s32 cx;      /* the next context's index; below 0: the runlevel is done */
  __s32 si_type;
  __u32 levels;
  __u32 level_frames; /* frames of this runlevel */
  __u32 finished;     /* read to the file-level code */
  __u32 pad;
  /* The words of a context or runlevel read at once (here, not on the stack: the layout's
   * offsets index them) */
  __u64 window[PERL_CX_WINDOW_WORDS];
  struct bpfprof_perl_stack_event event;
};
struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct perl_reading);
} perl_readings SEC(".maps");

static __always_inline bool perl_pointer(__u64 p) {
  return p >= 0x10000ull && p < 0x800000000000ull && !(p & 7);
}

/* A value of `bytes` (1, 2, 4 or 8) at a byte offset the layout gives, in a window of words
 * read at once. */
static __always_inline __u64 perl_window_value(const __u64* words, __u32 count, __u32 offset,
                                               __u32 bytes) {
  const __u32 i = offset / 8;
  const __u64 word = i < count ? words[i] : 0;
  const __u64 shifted = word >> ((offset & 7) * 8);
  return bytes >= 8 ? shifted : shifted & ((1ull << (bytes * 8)) - 1);
}

/* A sub's name key: its CV's xcv_gv_u (a GV, or a HEK when CvNAMED); 0 for what is no CV. */
static __always_inline __u64 perl_cv_name(const struct bpfprof_perl_process* p, __u64 cv) {
  __u32 flags = 0;
  if (!perl_pointer(cv) || bpf_probe_read_user(&flags, sizeof(flags), (void*)(cv + p->sv_flags)))
    return 0;
  const __u64 body = read_user_word(cv); /* sv_any */
  if ((flags & PERL_SVT_MASK) != PERL_SVT_PVCV || !perl_pointer(body)) return 0;
  return read_user_word(body + p->xcv_gv_u);
}

/* After a require's frame, the text of its %INC key (the PV of its namesv), if there is room. */
static __always_inline void perl_push_text(struct perl_reading* r, __u64 namesv) {
  struct bpfprof_perl_stack_event* e = &r->event;
  __u32 depth = e->depth;
  if (depth >= BPFPROF_MAX_PERL_FRAMES || !perl_pointer(namesv)) return;
  barrier_var(depth); /* else the compiler drops the mask the verifier needs, after the test */
  struct bpfprof_perl_frame* f = &e->frames[depth & (BPFPROF_MAX_PERL_FRAMES - 1)];
  const __u64 text = read_user_word(namesv + r->process.sv_u);
  if (!perl_pointer(text) || bpf_probe_read_user_str(f, BPFPROF_PERL_TEXT_BYTES, (void*)text) <= 0)
    return;
  f->kind = BPFPROF_PERL_FRAME_TEXT;
  f->flags = 0;
  f->reserved = 0;
  e->depth += 1;
}

/* The next frame, at the statement the walk is at: `kind` | flags << 8. A sub's name key is
 * read from its CV. 1 past the limit. */
__noinline int perl_push(struct perl_reading* r, __u32 kind_flags, __u64 cv, __u64 name) {
  if (!r) return 1;
  struct bpfprof_perl_stack_event* e = &r->event;
  if (e->depth >= BPFPROF_MAX_PERL_FRAMES) {
    e->status = BPFPROF_PERL_STACK_AT_LIMIT;
    return 1;
  }
  struct bpfprof_perl_frame* f = &e->frames[e->depth & (BPFPROF_MAX_PERL_FRAMES - 1)];
  const __u8 kind = (__u8)kind_flags;
  const bool in_block = r->si_type == PERL_SI_SORT || r->si_type == PERL_SI_MULTICALL;
  f->kind = kind;
  f->flags = (__u8)(kind_flags >> 8) |
             (in_block && kind != BPFPROF_PERL_FRAME_XSUB ? BPFPROF_PERL_IN_BLOCK : 0);
  f->reserved = 0;
  f->cv = cv;
  f->name = kind == BPFPROF_PERL_FRAME_SUB ? perl_cv_name(&r->process, cv) : name;
  f->line = 0;
  f->file = 0;
  if (perl_pointer(r->cop)) {
    __u32 line = 0;
    if (!bpf_probe_read_user(&line, sizeof(line), (void*)(r->cop + r->process.cop_line)))
      f->line = line;
    f->file = read_user_word(r->cop + r->process.cop_file);
  }
  e->depth += 1;
  r->level_frames += 1;
  if (kind == BPFPROF_PERL_FRAME_REQUIRE) perl_push_text(r, name);
  return 0;
}

/* Starts runlevel `si`: 1 when it does not read as one. */
__noinline int perl_runlevel(struct perl_reading* r, __u64 si) {
  if (!r) return 1;
  const struct bpfprof_perl_process* p = &r->process;
  __u64* words = r->window;
  if (!perl_pointer(si) ||
      bpf_probe_read_user(words, PERL_SI_WINDOW_WORDS * sizeof(__u64), (void*)si))
    return 1;
  r->si = si;
  r->cxstack = perl_window_value(words, PERL_SI_WINDOW_WORDS, p->si_cxstack, 8);
  r->cx = (__s32)perl_window_value(words, PERL_SI_WINDOW_WORDS, p->si_cxix, 4);
  r->si_type = (__s32)perl_window_value(words, PERL_SI_WINDOW_WORDS, p->si_type, 4);
  r->level_frames = 0;
  return !(r->cx >= -1 && r->cx < PERL_MAX_CONTEXTS && (r->cx < 0 || perl_pointer(r->cxstack)));
}

/* The XSUB that ran a MULTICALL block: it switched from the stack of runlevel `prev` with its
 * stack pointer saved as that stack's fill, and the SV pp_entersub called it by lies just above
 * (until the XSUB returns values over it). 1 past the limit. */
__noinline int perl_multicall_caller(struct perl_reading* r, __u64 prev) {
  if (!r) return 1;
  const struct bpfprof_perl_process* p = &r->process;
  const __u64 stack = read_user_word(prev + p->si_stack);
  if (!perl_pointer(stack)) return 0;
  const __u64 fill = read_user_word(read_user_word(stack) + p->av_fill);
  const __u64 array = read_user_word(stack + p->sv_u);
  if (!perl_pointer(array) || fill >= (1ull << 28)) return 0;
  const __u64 sv = read_user_word(array + (fill + 1) * 8);
  return perl_pointer(sv) ? perl_push(r, BPFPROF_PERL_FRAME_XSUB, sv, 0) : 0;
}

/* A runlevel done: a sort block's gets a frame (its op loop runs no context of its own),
 * then the one it was pushed over, or the file-level code after the outermost. 1: done. */
static __always_inline int perl_runlevel_done(struct perl_reading* r) {
  struct bpfprof_perl_stack_event* e = &r->event;
  if (r->si_type == PERL_SI_SORT && r->level_frames == 0 &&
      perl_push(r, BPFPROF_PERL_FRAME_SORT | BPFPROF_PERL_FROM_C << 8, 0, 0))
    return 1;
  const __u64 prev = read_user_word(r->si + r->process.si_prev);
  if (!prev) {
    r->finished = !perl_push(r, BPFPROF_PERL_FRAME_FILE | BPFPROF_PERL_FROM_C << 8, 0, 0);
    return 1;
  }
  if (r->si_type == PERL_SI_MULTICALL && perl_multicall_caller(r, prev)) return 1;
  r->levels += 1;
  if (r->levels >= PERL_MAX_RUNLEVELS) {
    e->status = BPFPROF_PERL_STACK_AT_LIMIT;
    return 1;
  }
  if (perl_runlevel(r, prev)) {
    e->status = BPFPROF_PERL_STACK_UNREADABLE;
    return 1;
  }
  return 0;
}

/* What a context is as a frame (kind | flags << 8, its cv and name), or 0xff: no frame (a
 * loop, block, given, when). */
static __always_inline __u32 perl_context_frame(const struct bpfprof_perl_process* p,
                                                const __u64* cx, __u64* cv, __u64* name) {
  const __u8 type_byte = (__u8)perl_window_value(cx, PERL_CX_WINDOW_WORDS, p->cx_type, 1);
  const __u8 type = type_byte & PERL_CX_TYPE_MASK;
  const __u32 from_c =
      perl_window_value(cx, PERL_CX_WINDOW_WORDS, p->cx_retop, 8) ? 0 : BPFPROF_PERL_FROM_C;
  if ((type == PERL_CX_SUB && !(type_byte & PERL_CX_SUB_RE_FAKE)) || type == PERL_CX_FORMAT) {
    *cv = perl_window_value(cx, PERL_CX_WINDOW_WORDS, p->cx_sub_cv, 8);
    return BPFPROF_PERL_FRAME_SUB | from_c << 8;
  }
  if (type != PERL_CX_EVAL) return 0xff;
  const __u32 old_op = (__u32)perl_window_value(cx, PERL_CX_WINDOW_WORDS, p->cx_u16, 2) >> 7;
  const bool text = type_byte & PERL_CX_EVAL_REAL;
  if (old_op == p->op_require && !text && !(type_byte & PERL_CX_EVAL_BLOCK)) {
    *name = perl_window_value(cx, PERL_CX_WINDOW_WORDS, p->cx_eval_namesv, 8);
    return BPFPROF_PERL_FRAME_REQUIRE | from_c << 8;
  }
  *cv = perl_window_value(cx, PERL_CX_WINDOW_WORDS, p->cx_eval_cv, 8);
  const __u32 flags =
      from_c | (text ? BPFPROF_PERL_EVAL_TEXT : 0) | (old_op == 0 ? BPFPROF_PERL_EVAL_OF_C : 0);
  return BPFPROF_PERL_FRAME_EVAL | flags << 8;
}

/* One step of the walk: the next context, or the end of a runlevel. 1: done. */
__noinline int perl_step(struct perl_reading* r) {
  if (!r) return 1;
  if (r->cx < 0) return perl_runlevel_done(r);
  const struct bpfprof_perl_process* p = &r->process;
  __u64* cx = r->window;
  const __u64 at = r->cxstack + (__u64)(__u32)r->cx * p->cx_size;
  r->cx -= 1;
  if (bpf_probe_read_user(cx, PERL_CX_WINDOW_WORDS * sizeof(__u64), (void*)at)) {
    r->event.status = BPFPROF_PERL_STACK_UNREADABLE;
    return 1;
  }
  __u64 cv = 0, name = 0;
  const __u32 frame = perl_context_frame(p, cx, &cv, &name);
  if (frame == 0xff) return 0;
  if (perl_push(r, frame, cv, name)) return 1;
  r->cop = perl_window_value(cx, PERL_CX_WINDOW_WORDS, p->cx_oldcop, 8);
  return 0;
}

struct perl_loop_context {
  struct perl_reading* reading;
};

static long perl_loop_step(__u64 index, void* context) {
  (void)index;
  struct perl_loop_context* c = context;
  return perl_step(c->reading) ? 1 : 0;
}

/* The XSUB being called, if the op running is an entersub: pp_entersub calls an XSUB without
 * a context, and leaves the SV it called (CV, GV or reference) just above the stack pointer
 * until the XSUB returns values over it. Userspace keeps it only if it is an XSUB. */
__noinline int perl_xsub_leaf(struct perl_reading* r, __u64 my_perl) {
  if (!r) return 0;
  const struct bpfprof_perl_process* p = &r->process;
  const __u64 op = read_user_word(my_perl + p->interp_op);
  __u16 type = 0;
  if (!perl_pointer(op) || bpf_probe_read_user(&type, sizeof(type), (void*)(op + p->op_type)) ||
      (type & 0x1ff) != p->op_entersub)
    return 0;
  const __u64 sp = read_user_word(my_perl + p->interp_stack_sp);
  const __u64 sv = perl_pointer(sp) ? read_user_word(sp + 8) : 0;
  if (perl_pointer(sv)) perl_push(r, BPFPROF_PERL_FRAME_XSUB, sv, 0);
  return 0;
}

/* Reads the current thread's frames into r->event; its header set by the caller. */
__noinline int perl_read_stack(struct perl_reading* r) {
  if (!r) return 0;
  struct bpfprof_perl_stack_event* e = &r->event;
  const __u64 fs = current_thread_pointer();
  const __u64 my_perl = fs ? read_user_word(fs + r->process.tls_offset) : 0;
  if (!perl_pointer(my_perl)) {
    e->status = BPFPROF_PERL_STACK_IDLE;
    return 0;
  }
  r->cop = read_user_word(my_perl + r->process.interp_curcop);
  r->levels = 0;
  r->finished = 0;
  perl_xsub_leaf(r, my_perl);
  if (perl_runlevel(r, read_user_word(my_perl + r->process.interp_curstackinfo))) {
    e->status = BPFPROF_PERL_STACK_UNREADABLE;
    return 0;
  }
  struct perl_loop_context c = {.reading = r};
  bpf_loop(PERL_MAX_CONTEXTS, perl_loop_step, &c, 0);
  if (!r->finished && e->status == BPFPROF_PERL_STACK_COMPLETE)
    e->status = BPFPROF_PERL_STACK_AT_LIMIT;
  return 0;
}

/* Sends the Perl frames of the current task with the header of the stack event that follows;
 * nothing for a process that is not a known perl. */
static __always_inline void send_perl_stack(const struct bpfprof_event_header* sample, __u32 slot,
                                            bool walked) {
  (void)slot;
  (void)walked;
  __u32 tgid = sample->pid;
  if (!runtime_processes[BPFPROF_RUNTIME_PERL]) return;
  const struct bpfprof_perl_process* p = bpf_map_lookup_elem(&perl_processes, &tgid);
  if (!p) return;
  __u32 zero = 0;
  struct perl_reading* r = bpf_map_lookup_elem(&perl_readings, &zero);
  if (!r) return;
  r->process = *p;
  struct bpfprof_perl_stack_event* e = &r->event;
  e->header = *sample;
  e->header.kind = BPFPROF_EVENT_PERL_STACK;
  e->depth = 0;
  e->status = BPFPROF_PERL_STACK_COMPLETE;
  perl_read_stack(r);
  send_event(
      e,
      offsetof(struct bpfprof_perl_stack_event, frames) +
          (__u64)(e->depth & (BPFPROF_MAX_PERL_FRAMES * 2 - 1)) * sizeof(struct bpfprof_perl_frame),
      sizeof(*e), tgid);
}

#endif
