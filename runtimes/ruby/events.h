/* What CRuby's BPF reader (runtimes/ruby/frames.bpf.h) and userspace share: the event
 * with a thread's frames, sent through the ring buffer as BPFPROF_EVENT_RUBY_STACK, and the
 * entry of one process in its map. Plain C, fixed-size fields only. */
#ifndef BPFPROF_RUBY_EVENTS_H
#define BPFPROF_RUBY_EVENTS_H

#include "bpf/events.h"

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

#endif
