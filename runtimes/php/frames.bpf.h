/* PHP frames: for a process that userspace registered as a PHP interpreter (NTS: its executor
 * globals at a fixed address), each sample (and off-CPU stack) is preceded by an event with the
 * Zend engine's frames of the thread: from EG(current_execute_data) along prev_execute_data,
 * each frame's function (and its name and class, for userspace to read once), its current line
 * and its call info, innermost first. Userspace names them and puts them in place of the native
 * execute_ex frames (ZEND_CALL_TOP marks the first frame of each).
 * Its maps are here, its event in runtimes/php/events.h. */
#ifndef BPFPROF_PHP_FRAMES_H
#define BPFPROF_PHP_FRAMES_H

#include "vmlinux.h"

#include <bpf/bpf_helpers.h>

#include "bpf/events.h"
#include "bpf/helpers.h"
#include "bpf/maps.h"
#include "bpf/runtime_code.h"
#include "runtimes/php/events.h"

/* tgid -> where its executor globals are and how its structures are laid out. */
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 4096);
  __type(key, __u32);
  __type(value, struct bpfprof_php_process);
} php_processes SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct bpfprof_php_stack_event);
} php_scratch_space SEC(".maps");

/* The Zend engine's function types (zend_compile.h): internal, user, eval'd code. */
#define PHP_INTERNAL_FUNCTION 1
#define PHP_USER_FUNCTION 2
#define PHP_EVAL_CODE 4
/* Below this, an address is no PHP heap's (the first pages are never mapped). */
#define PHP_MIN_ADDRESS 0x10000ull
/* The bytes read at once from the start of a zend_execute_data (opline to prev_execute_data
 * in every 8.x: 56) and of a zend_function (type to common.scope: 24). */
#define PHP_EX_WINDOW_WORDS 8
#define PHP_FUNC_WINDOW_WORDS 3

struct php_frame_walk {
  const struct bpfprof_php_process* process;
  struct bpfprof_php_stack_event* event;
  __u64 ex;         /* the next zend_execute_data */
  __u64 top_opline; /* the innermost frame's opline as the VM loop holds it (r15), or 0 */
};

/* A pointer a frame may hold: user space, 8-aligned. */
static __always_inline bool php_pointer(__u64 p) {
  return p >= PHP_MIN_ADDRESS && p < 0x800000000000ull && !(p & 7);
}

/* A word of a window read at once, at a byte offset the layout gives (8-aligned). */
static __always_inline __u64 php_window_word(const __u64* words, __u32 count, __u32 offset) {
  const __u32 i = offset / 8;
  return i < count ? words[i] : 0;
}

/* A user function's source (filename and first line) and, in `code`, its opcodes' count and
 * address. False when they cannot be read. */
static __always_inline bool php_user_code(const struct bpfprof_php_process* p, __u64 func,
                                          struct bpfprof_php_frame* f, __u64 code[2]) {
  __u64 source[2]; /* filename, and line_start (u32) a word on */
  if (bpf_probe_read_user(code, 2 * sizeof(__u64), (void*)(func + p->op_array_last)) ||
      bpf_probe_read_user(source, sizeof(source), (void*)(func + p->op_array_filename)))
    return false;
  f->filename = source[0];
  f->line_start = (__u32)source[1];
  return true;
}

/* A user frame's current line: its opline's, when the opline is one of its function's (in the
 * opcodes array `code` gives, on an op's boundary); 0 otherwise. A frame that the JIT entered
 * may hold a stale opline of another function, never a line of it. */
static __always_inline __u32 php_frame_line(const struct bpfprof_php_process* p,
                                            const __u64 code[2], __u64 opline) {
  const __u64 last = (__u32)code[0], opcodes = code[1];
  __u32 line = 0;
  if (!php_pointer(opline) || !p->op_size || opline < opcodes ||
      opline >= opcodes + last * p->op_size || (opline - opcodes) % p->op_size)
    return 0;
  if (bpf_probe_read_user(&line, sizeof(line), (void*)(opline + p->op_lineno))) return 0;
  return line;
}

static long read_php_frame(__u64 index, void* context) {
  struct php_frame_walk* w = context;
  struct bpfprof_php_stack_event* e = w->event;
  if (!w->ex) return 1; /* COMPLETE */
  if (index >= BPFPROF_MAX_PHP_FRAMES) {
    e->status = BPFPROF_PHP_STACK_AT_LIMIT;
    return 1;
  }
  const struct bpfprof_php_process* p = w->process;
  struct bpfprof_php_frame* f = &e->frames[index & (BPFPROF_MAX_PHP_FRAMES - 1)];
  __u64 ex[PHP_EX_WINDOW_WORDS], fn[PHP_FUNC_WINDOW_WORDS], code[2];
  if (!php_pointer(w->ex) || bpf_probe_read_user(ex, sizeof(ex), (void*)w->ex)) goto unreadable;
  const __u64 prev = php_window_word(ex, PHP_EX_WINDOW_WORDS, p->ex_prev);
  const __u64 func = php_window_word(ex, PHP_EX_WINDOW_WORDS, p->ex_func);
  if (!php_pointer(func) || bpf_probe_read_user(fn, sizeof(fn), (void*)func) || prev == w->ex)
    goto unreadable;
  const __u8 type = (__u8)fn[0];
  if (type != PHP_INTERNAL_FUNCTION && type != PHP_USER_FUNCTION && type != PHP_EVAL_CODE)
    goto unreadable;
  f->type = type;
  f->name = php_window_word(fn, PHP_FUNC_WINDOW_WORDS, p->func_name);
  f->scope = php_window_word(fn, PHP_FUNC_WINDOW_WORDS, p->func_scope);
  /* type_info is the low half of its word (little-endian, 8-aligned in every 8.x) */
  f->call_info = (__u32)php_window_word(ex, PHP_EX_WINDOW_WORDS, p->ex_call_info) >> 16;
  f->filename = 0;
  f->line_start = 0;
  f->lineno = 0;
  /* Internal functions have no source and run no oplines. The VM loop writes a frame's opline
   * to memory only before it calls out: the innermost frame's is its register's (r15) while it
   * runs. */
  if (type != PHP_INTERNAL_FUNCTION) {
    if (!php_user_code(p, func, f, code)) goto unreadable;
    const __u64 opline = index == 0 && w->top_opline
                             ? w->top_opline
                             : php_window_word(ex, PHP_EX_WINDOW_WORDS, p->ex_opline);
    f->lineno = php_frame_line(p, code, opline);
  }
  e->depth = index + 1;
  w->ex = prev;
  return 0;
unreadable:
  e->status = BPFPROF_PHP_STACK_UNREADABLE;
  return 1;
}

/* The innermost frame's opline while the VM loop runs it: Debian's builds keep the frame in
 * r14 and its opline in r15 (GCC global registers), and write the opline back only before
 * they call out. 0 elsewhere (in C code, in JIT code, which uses r15 as scratch). */
static __always_inline __u64 php_running_opline(const struct bpfprof_php_process* p, __u64 ex) {
  /* BTF loads (bpf_task_pt_regs): no helper */
  struct pt_regs* regs = (struct pt_regs*)bpf_task_pt_regs(bpf_get_current_task_btf());
  if (!regs) return 0;
  const __u64 pc = regs->ip;
  if (pc < p->vm_low || pc >= p->vm_high || regs->r14 != ex) return 0;
  return regs->r15;
}

/* Sends the PHP frames of the current task with the header of the stack event that follows;
 * nothing for a process that is not a known PHP interpreter. */
static __always_inline void send_php_stack(const struct bpfprof_event_header* sample, __u32 slot,
                                           bool walked) {
  (void)slot;
  (void)walked;
  __u32 tgid = sample->pid;
  if (!runtime_processes[BPFPROF_RUNTIME_PHP]) return;
  const struct bpfprof_php_process* p = bpf_map_lookup_elem(&php_processes, &tgid);
  if (!p) return;
  __u32 zero = 0;
  struct bpfprof_php_stack_event* e = bpf_map_lookup_elem(&php_scratch_space, &zero);
  if (!e) return;
  e->header = *sample;
  e->header.kind = BPFPROF_EVENT_PHP_STACK;
  e->depth = 0;
  e->status = BPFPROF_PHP_STACK_COMPLETE;
  struct php_frame_walk w = {
      .process = p, .event = e, .ex = read_user_word(p->current_execute_data)};
  if (!w.ex) {
    e->status = BPFPROF_PHP_STACK_IDLE;
  } else {
    w.top_opline = php_running_opline(p, w.ex);
    bpf_loop(BPFPROF_MAX_PHP_FRAMES + 1, read_php_frame, &w, 0);
  }
  send_event(
      e,
      offsetof(struct bpfprof_php_stack_event, frames) +
          (__u64)(e->depth & (BPFPROF_MAX_PHP_FRAMES * 2 - 1)) * sizeof(struct bpfprof_php_frame),
      sizeof(*e), tgid);
}

/* A walk of process `tgid` starts: opcache's JIT code, if it has any, runs on execute_ex's
 * frame, entered by jumps: its frames step by execute_ex's row, but in its trace_exit stub,
 * which saves the registers below sp around its call. */
static __always_inline void php_code_start(struct runtime_code* code, __u32 tgid) {
  if (!runtime_processes[BPFPROF_RUNTIME_PHP]) return;
  const struct bpfprof_php_process* p = bpf_map_lookup_elem(&php_processes, &tgid);
  if (!p || p->jit_low >= p->jit_high) return;
  runtime_code_add(code, p->jit_low, p->jit_high);
  code->runtime = BPFPROF_RUNTIME_PHP;
  code->by_rule = 1;
  code->rule = p->vm_rule;
  code->moved_low = p->trace_exit_low;
  code->moved_high = p->trace_exit_high;
  code->moved_by = p->trace_exit_moved_by;
}

#endif
