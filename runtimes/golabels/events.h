/* What the BPF reader of Go's goroutine labels (runtimes/golabels/frames.bpf.h) and userspace
 * share: the event with the running goroutine's label set, sent through the ring buffer just
 * before the stack event it belongs to, and the entry of one Go process in its map. Plain C,
 * fixed-size fields only. */
#ifndef BPFPROF_GOLABELS_EVENTS_H
#define BPFPROF_GOLABELS_EVENTS_H

#include "bpf/events.h"

/* The bounds of a label set read at a sample: pairs, and the bytes kept of each key and
 * value (a longer one is cut; its full length is sent). */
#define BPFPROF_MAX_GO_LABELS 8
#define BPFPROF_GO_LABEL_KEY_BYTES 64
#define BPFPROF_GO_LABEL_VALUE_BYTES 128

/* How a release keeps a goroutine's labels (symbols/go/labels_layout.h). */
enum bpfprof_go_labels_form {
  BPFPROF_GO_LABELS_MAP = 0,   /* 1.17-1.23: g.labels -> *map[string]string (hmap, one bucket) */
  BPFPROF_GO_LABELS_SLICE = 1, /* 1.24 on: g.labels -> {[]{key, value string}}, sorted by key */
};

enum bpfprof_go_labels_status {
  BPFPROF_GO_LABELS_READ = 0,       /* `count` pairs follow */
  BPFPROF_GO_LABELS_KNOWN = 1,      /* the set `set` was sent whole less than a second ago */
  BPFPROF_GO_LABELS_UNREADABLE = 2, /* a read failed: no labels for this sample */
  BPFPROF_GO_LABELS_TOO_MANY = 3,   /* more than BPFPROF_MAX_GO_LABELS (the first ones follow) */
};

struct bpfprof_go_label {
  __u32 key_length; /* the string's length; at most BPFPROF_GO_LABEL_KEY_BYTES of it are here */
  __u32 value_length;
  char key[BPFPROF_GO_LABEL_KEY_BYTES];
  char value[BPFPROF_GO_LABEL_VALUE_BYTES];
};

/* Only the used part of `frames` is sent. */
struct bpfprof_golabels_stack_event {
  struct bpfprof_event_header header;
  __u64 set;    /* the goroutine's g.labels: with the pid, which set this is */
  __u32 count;  /* pairs in `frames` */
  __u32 status; /* enum bpfprof_go_labels_status */
  /* The pairs: as every runtime's event, the variable part last, named `frames` (one label set
   * becomes one frame at the stack's root). */
  struct bpfprof_go_label frames[BPFPROF_MAX_GO_LABELS];
};

/* Where one Go process keeps its running goroutine's labels (userspace reads the offsets from
 * the binary: symbols/go/cgo_switches.h, labels_layout.h). */
struct bpfprof_go_labels_process {
  __s32 g_slot;   /* g's offset from the thread pointer (fs) */
  __u32 m_curg;   /* m.curg */
  __u32 g_labels; /* g.labels */
  __u32 form;     /* enum bpfprof_go_labels_form */
};

#endif
