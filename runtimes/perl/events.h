/* What Perl's BPF reader (runtimes/perl/frames.bpf.h) and userspace share: the event with a
 * thread's Perl frames (its interpreter's context stacks), sent through the ring buffer as
 * BPFPROF_EVENT_PERL_STACK, and the entry of one perl process in its map. Plain C, fixed-size
 * fields only. */
#ifndef BPFPROF_PERL_EVENTS_H
#define BPFPROF_PERL_EVENTS_H

#include "bpf/events.h"

#define BPFPROF_MAX_PERL_FRAMES 128

enum bpfprof_perl_frame_kind {
  BPFPROF_PERL_FRAME_SUB = 0,     /* a sub or format: cv, name (its CvGV or CvNAME_HEK) */
  BPFPROF_PERL_FRAME_EVAL = 1,    /* eval {} or eval "" (cv: the string's code) */
  BPFPROF_PERL_FRAME_REQUIRE = 2, /* require of a file: name is its %INC key (a PV SV) */
  BPFPROF_PERL_FRAME_FILE = 3,    /* the file-level code, outermost */
  BPFPROF_PERL_FRAME_SORT = 4,    /* a sort block's run of the op loop (no context of its own) */
  BPFPROF_PERL_FRAME_XSUB = 5,    /* the SV pp_entersub took (a CV, GV or ref): innermost, or
                                     the one whose MULTICALL block runs inside */
  /* Not a frame: the text of the require just inside it (its %INC key, NUL-terminated, cut
   * at BPFPROF_PERL_TEXT_BYTES - 1), in the bytes before `kind`. Read at the sample: the key's
   * SV is freed once the require is done, often before userspace reads the event. */
  BPFPROF_PERL_FRAME_TEXT = 6,
};

#define BPFPROF_PERL_TEXT_BYTES 28 /* cv, name, file and line's bytes */

/* Frame flags. */
#define BPFPROF_PERL_FROM_C 1    /* its retop is 0: entered from C by its own op loop */
#define BPFPROF_PERL_EVAL_TEXT 2 /* an eval of a string (CXp_REAL) */
#define BPFPROF_PERL_EVAL_OF_C 4 /* an eval that C pushed around a call (old op type 0) */
#define BPFPROF_PERL_IN_BLOCK 8  /* in a runlevel of sort's or an XSUB's block (MULTICALL) */

/* A frame, with the statement it was running (its line read at once: the COPs of a string
 * eval go with its code). */
struct bpfprof_perl_frame {
  __u64 cv;   /* the sub's or the string eval's CV; the XSUB's SV; 0 */
  __u64 name; /* a sub's xcv_gv_u (with cv, what its name is kept by), a require's namesv */
  __u64 file; /* the statement's cop_file (a shared C string), 0 if not read */
  __u32 line; /* the statement's cop_line, 0 if not read */
  __u8 kind;  /* enum bpfprof_perl_frame_kind */
  __u8 flags; /* BPFPROF_PERL_* */
  __u16 reserved;
};

enum bpfprof_perl_stack_status {
  BPFPROF_PERL_STACK_COMPLETE = 0,   /* read to the file-level code */
  BPFPROF_PERL_STACK_IDLE = 1,       /* no interpreter on this thread */
  BPFPROF_PERL_STACK_UNREADABLE = 2, /* a read failed or a structure made no sense: cut there */
  BPFPROF_PERL_STACK_AT_LIMIT = 3,   /* deeper than BPFPROF_MAX_PERL_FRAMES or the contexts read */
};

/* Only the used part of `frames` is sent. */
struct bpfprof_perl_stack_event {
  struct bpfprof_event_header header;
  __u32 depth;  /* frames, innermost first */
  __u32 status; /* enum bpfprof_perl_stack_status */
  struct bpfprof_perl_frame frames[BPFPROF_MAX_PERL_FRAMES];
};

/* Where a thread's interpreter is and the offsets the walk reads (runtimes/perl/layout.h). */
struct bpfprof_perl_process {
  __s64 tls_offset; /* my_perl = *(thread pointer + tls_offset) */
  __u32 interp_stack_sp;
  __u32 interp_op;
  __u32 interp_curcop;
  __u32 interp_curstackinfo;
  __u32 si_cxstack;
  __u32 si_prev;
  __u32 si_cxix;
  __u32 si_type;
  __u32 si_stack; /* its argument stack (an AV) */
  __u32 av_fill;  /* in an AV's body: AvFILLp */
  __u32 sv_u;     /* an AV's array */
  __u32 cx_size;
  __u32 cx_type;
  __u32 cx_u16;
  __u32 cx_oldcop;
  __u32 cx_retop;
  __u32 cx_sub_cv;
  __u32 cx_eval_namesv;
  __u32 cx_eval_cv;
  __u32 cop_line;
  __u32 cop_file;
  __u32 sv_flags;
  __u32 xcv_gv_u;
  __u32 op_type;     /* the u16 whose low 9 bits are op_type */
  __u16 op_entersub; /* OP_ENTERSUB */
  __u16 op_require;  /* OP_REQUIRE: an eval context's old op type */
};

#endif
