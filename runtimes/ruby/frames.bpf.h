/* Ruby frames: for a process that userspace registered as a CRuby interpreter, each sample
 * (and each off-CPU stack) is preceded by an event with the thread's control frames, read
 * from the VM's own structures: each frame's iseq (a C method's: its method entry), pc and
 * ep flags, innermost first, from the thread's ec->cfp up to the end of its VM stack.
 * Userspace names them and keeps the frames of Ruby code and of C methods (the flags say
 * which), in place of the native rb_vm_exec frames.
 * Its maps are here, its event in runtimes/ruby/events.h. */
#ifndef BPFPROF_RUBY_FRAMES_H
#define BPFPROF_RUBY_FRAMES_H

#include "vmlinux.h"

#include <bpf/bpf_helpers.h>

#include "bpf/events.h"
#include "bpf/helpers.h"
#include "bpf/maps.h"
#include "runtimes/ruby/events.h"

/* Ruby (runtimes/ruby/frames.bpf.h): tgid -> where its VM is and how it is laid out
 * (userspace fills it when it sees a mapping of a libruby of a known version). */
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 4096);
  __type(key, __u32); /* tgid */
  __type(value, struct bpfprof_ruby_process);
} ruby_processes SEC(".maps");

/* Each thread's rb_thread_t as last found, checked on every use against its thread_id:
 * finding it walks the main ractor's thread list. */
struct {
  __uint(type, BPF_MAP_TYPE_LRU_HASH);
  __uint(max_entries, 65536);
  __type(key, __u32);   /* tid */
  __type(value, __u64); /* rb_thread_t* in the thread's process */
} ruby_threads SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct bpfprof_ruby_stack_event);
} ruby_scratch_space SEC(".maps");

/* A bound for the thread-list walk: threads beyond it get no Ruby frames. */
#define RUBY_MAX_THREADS 512

struct ruby_thread_search {
  const struct bpfprof_ruby_process* process;
  __u64 head; /* the list's own node: the end of the list */
  __u64 node; /* the one being looked at: an rb_thread_t starts with its list node */
  __u64 key;  /* the sampled thread's FS base */
  bool found;
};

static long check_ruby_thread(__u64 index, void* context) {
  struct ruby_thread_search* s = context;
  if (!s->node || s->node == s->head) return 1;
  if (read_user_word(s->node + s->process->thread_native_id) == s->key) {
    s->found = true;
    return 1;
  }
  s->node = read_user_word(s->node); /* list_node.next */
  return 0;
}

/* The rb_thread_t of the current thread, or 0: its thread_id is pthread_self(), glibc's
 * thread pointer, the FS base on x86-64 (thread.fsbase of the task). */
static __always_inline __u64 ruby_thread(const struct bpfprof_ruby_process* p, __u32 tid) {
  const __u64 key = current_thread_pointer();
  if (!key) return 0;
  __u64* cached = bpf_map_lookup_elem(&ruby_threads, &tid);
  if (cached && *cached && read_user_word(*cached + p->thread_native_id) == key) return *cached;
  __u64 vm = read_user_word(p->vm_pointer);
  __u64 ractor = vm ? read_user_word(vm + p->vm_main_ractor) : 0;
  if (!ractor) return 0;
  const __u64 head = ractor + p->ractor_threads_head;
  struct ruby_thread_search s = {
      .process = p, .head = head, .node = read_user_word(head), .key = key, .found = false};
  bpf_loop(RUBY_MAX_THREADS, check_ruby_thread, &s, 0);
  if (!s.found) return 0;
  bpf_map_update_elem(&ruby_threads, &tid, &s.node, BPF_ANY);
  return s.node;
}

struct ruby_frame_walk {
  const struct bpfprof_ruby_process* process;
  struct bpfprof_ruby_stack_event* event;
  __u64 cfp;       /* the next control frame */
  __u64 stack_end; /* vm_stack + vm_stack_size words: past the outermost frame */
};

static long read_ruby_frame(__u64 index, void* context) {
  struct ruby_frame_walk* w = context;
  struct bpfprof_ruby_stack_event* e = w->event;
  if (w->cfp + w->process->frame_size > w->stack_end) return 1; /* COMPLETE */
  if (index >= BPFPROF_MAX_RUBY_FRAMES) {
    e->status = BPFPROF_RUBY_STACK_AT_LIMIT;
    return 1;
  }
  const struct bpfprof_ruby_process* p = w->process;
  struct bpfprof_ruby_frame* f = &e->frames[index];
  __u64 ep = 0, flags = 0;
  if (bpf_probe_read_user(&f->iseq, sizeof(f->iseq), (void*)(w->cfp + p->frame_iseq)) ||
      bpf_probe_read_user(&f->pc, sizeof(f->pc), (void*)(w->cfp + p->frame_pc)) ||
      bpf_probe_read_user(&ep, sizeof(ep), (void*)(w->cfp + p->frame_ep)) ||
      bpf_probe_read_user(&flags, sizeof(flags), (void*)ep)) {
    e->status = BPFPROF_RUBY_STACK_UNREADABLE;
    return 1;
  }
  /* A C method's frame runs no iseq: its method entry names it. */
  if (((__u32)flags & p->frame_magic_mask) == p->frame_magic_cfunc &&
      bpf_probe_read_user(&f->iseq, sizeof(f->iseq), (void*)(ep - p->ep_method_entry)))
    f->iseq = 0;
  f->flags = (__u32)flags;
  f->reserved = 0;
  e->depth = index + 1;
  w->cfp += p->frame_size;
  return 0;
}

/* Sends the Ruby frames of the current task with the header of the stack event that
 * follows; nothing for a process that is not a known Ruby interpreter. `slot` and `walked` (the
 * native walk) are not needed: the frames are read from the thread's own state. */
static __always_inline void send_ruby_stack(const struct bpfprof_event_header* sample, __u32 slot,
                                            bool walked) {
  (void)slot;
  (void)walked;
  __u32 tgid = sample->pid;
  if (!runtime_processes[BPFPROF_RUNTIME_RUBY]) return;
  const struct bpfprof_ruby_process* p = bpf_map_lookup_elem(&ruby_processes, &tgid);
  if (!p || !p->frame_size) return;
  __u32 zero = 0;
  struct bpfprof_ruby_stack_event* e = bpf_map_lookup_elem(&ruby_scratch_space, &zero);
  if (!e) return;
  e->header = *sample;
  e->header.kind = BPFPROF_EVENT_RUBY_STACK;
  e->depth = 0;
  e->status = BPFPROF_RUBY_STACK_COMPLETE;
  const __u64 thread = ruby_thread(p, sample->tid);
  e->thread = thread;
  const __u64 ec = thread ? read_user_word(thread + p->thread_ec) : 0;
  struct ruby_frame_walk w = {.process = p, .event = e};
  if (ec) {
    w.cfp = read_user_word(ec + p->ec_cfp);
    w.stack_end =
        read_user_word(ec + p->ec_vm_stack) + read_user_word(ec + p->ec_vm_stack_size) * 8;
  }
  if (!ec || !w.cfp)
    e->status = BPFPROF_RUBY_STACK_NO_THREAD;
  else
    bpf_loop(BPFPROF_MAX_RUBY_FRAMES + 1, read_ruby_frame, &w, 0);
  send_event(e,
             offsetof(struct bpfprof_ruby_stack_event, frames) +
                 (__u64)e->depth * sizeof(struct bpfprof_ruby_frame),
             sizeof(*e), tgid);
}

#endif
