/* What PHP's BPF reader (runtimes/php/frames.bpf.h) and userspace share: the event with the
 * Zend engine's frames of a thread (its execute_data chain), sent through the ring buffer as
 * BPFPROF_EVENT_PHP_STACK, and the entry of one PHP process in its map. Plain C, fixed-size
 * fields only. */
#ifndef BPFPROF_PHP_EVENTS_H
#define BPFPROF_PHP_EVENTS_H

#include "bpf/events.h"
#include "bpf/unwind_table.h"

#define BPFPROF_MAX_PHP_FRAMES 128

/* A frame as its function's fields give it: a closure's zend_function is a copy in the closure
 * object, gone soon after its call, so userspace never reads the function itself; the strings
 * and the class it points to live as long as the code. */
struct bpfprof_php_frame {
  __u64 name;       /* common.function_name (zend_string*), 0 for file-scope code */
  __u64 scope;      /* common.scope (zend_class_entry*) */
  __u64 filename;   /* op_array.filename (zend_string*) of user code, else 0 */
  __u32 line_start; /* op_array.line_start of user code, else 0 */
  __u32 lineno;     /* the frame's current line (its opline's), 0 if not read */
  __u32 call_info;  /* This.u1.type_info >> 16: ZEND_CALL_TOP, _CODE, _CLOSURE, ... */
  __u8 type;        /* func->type: 1 internal, 2 user, 4 eval'd code */
  __u8 reserved[3];
};

enum bpfprof_php_stack_status {
  BPFPROF_PHP_STACK_COMPLETE = 0,   /* read to the first frame of the request or script */
  BPFPROF_PHP_STACK_IDLE = 1,       /* no PHP code running (fpm between requests, start-up) */
  BPFPROF_PHP_STACK_UNREADABLE = 2, /* a read failed or a frame made no sense: cut there */
  BPFPROF_PHP_STACK_AT_LIMIT = 3,   /* deeper than BPFPROF_MAX_PHP_FRAMES */
};

/* Only the used part of `frames` is sent. */
struct bpfprof_php_stack_event {
  struct bpfprof_event_header header;
  __u32 depth;  /* frames, innermost first */
  __u32 status; /* enum bpfprof_php_stack_status */
  struct bpfprof_php_frame frames[BPFPROF_MAX_PHP_FRAMES];
};

/* Where one PHP process's running frame is, where its VM loop and JIT code lie, and the
 * offsets the walk reads (runtimes/php/layout.h). */
struct bpfprof_php_process {
  __u64 current_execute_data; /* &executor_globals.current_execute_data in the process */
  __u64 vm_low;               /* [vm_low, vm_high): execute_ex, the VM loop */
  __u64 vm_high;
  __u64 jit_low; /* [jit_low, jit_high): opcache's JIT code; empty without */
  __u64 jit_high;
  __u64 trace_exit_low; /* [low, high): the JIT's trace_exit stub with sp moved by */
  __u64 trace_exit_high;
  __u32 trace_exit_moved_by;
  struct bpfprof_unwind_rule vm_rule; /* execute_ex's CFI row over its body */
  __u32 ex_opline;                    /* zend_execute_data.opline */
  __u32 ex_func;                      /* .func */
  __u32 ex_call_info;                 /* .This.u1.type_info */
  __u32 ex_prev;                      /* .prev_execute_data */
  __u32 func_name;                    /* zend_function.common.function_name (type at 0) */
  __u32 func_scope;                   /* .common.scope */
  __u32 op_array_last;                /* zend_op_array.last (u32), .opcodes 8 bytes on */
  __u32 op_array_filename;            /* .filename, .line_start 8 bytes on */
  __u32 op_lineno;                    /* zend_op.lineno */
  __u32 op_size;                      /* sizeof(zend_op) */
};

#endif
