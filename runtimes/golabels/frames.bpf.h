/* Go's goroutine labels (pprof.Do, pprof.SetGoroutineLabels): for a process that userspace
 * registered as a Go program that sets them, each sample is preceded by an event with the
 * running goroutine's label set: g from the thread pointer, g.m, m.curg (the goroutine, also
 * when the thread is on g0 or a signal stack), curg.labels. A set is immutable in Go (a new
 * one for each change): one seen less than a second ago is sent by its address alone.
 * Its maps are here, its event in runtimes/golabels/events.h. */
#ifndef BPFPROF_GOLABELS_FRAMES_H
#define BPFPROF_GOLABELS_FRAMES_H

#include "vmlinux.h"

#include <bpf/bpf_helpers.h>

#include "bpf/events.h"
#include "bpf/helpers.h"
#include "bpf/maps.h"
#include "runtimes/golabels/events.h"

/* tgid -> where its goroutines' labels are. */
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 4096);
  __type(key, __u32);
  __type(value, struct bpfprof_go_labels_process);
} go_labels_processes SEC(".maps");

/* The label sets sent whole: (tgid, g.labels, the set's contents pointer) -> when. Go's
 * collector may put another set at a freed one's address: after a second, sent whole again. */
struct go_labels_seen_key {
  __u64 set;
  __u64 contents;
  __u32 tgid;
  __u32 reserved;
};
struct {
  __uint(type, BPF_MAP_TYPE_LRU_HASH);
  __uint(max_entries, 16384);
  __type(key, struct go_labels_seen_key);
  __type(value, __u64); /* ktime when sent */
} go_labels_seen SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct bpfprof_golabels_stack_event);
} go_labels_scratch SEC(".maps");

#define GO_LABELS_RESEND_NS 1000000000ull
#define GO_G_M 0x30      /* g.m: the same in every release */
#define GO_MIN_TOPHASH 5 /* a map bucket's slot is in use from this tophash on */
#define GO_MAP_KEYS 8    /* a bucket's keys: 8 strings, then 8 values, then the overflow pointer */
#define GO_MAP_VALUES (GO_MAP_KEYS + 8 * 16)

/* The running goroutine's g.labels, 0 if none: curg is the goroutine only if it runs on this
 * m (curg.m == m, as Go's own profiler checks). */
static __always_inline __u64 go_current_labels(const struct bpfprof_go_labels_process* p) {
  const __u64 fsbase = current_thread_pointer();
  if (!fsbase) return 0;
  const __u64 g = read_user_word(fsbase + (__s64)p->g_slot);
  const __u64 m = read_user_word(g + GO_G_M);
  const __u64 curg = read_user_word(m + p->m_curg);
  if (!curg || read_user_word(curg + GO_G_M) != m) return 0;
  return read_user_word(curg + p->g_labels);
}

/* One string {ptr, len} at `header` into `out` (at most `size` bytes); its length. */
static __always_inline bool go_read_string(__u64 header, char* out, __u32 size, __u32* length) {
  __u64 words[2] = {0, 0};
  if (bpf_probe_read_user(words, sizeof(words), (void*)header)) return false;
  *length = words[1] > 0xffffffffull ? 0xffffffffu : (__u32)words[1];
  const __u32 n = *length < size ? *length : size;
  if (!n) return true;
  /* 1..size bytes (size a power of two), in instructions the compiler keeps for the verifier. */
  __u64 last = n - 1;
  asm volatile("%[last] &= %[mask]" : [last] "+r"(last) : [mask] "r"((__u64)size - 1));
  return bpf_probe_read_user(out, last + 1, (void*)words[0]) == 0;
}

static __always_inline bool go_read_pair(struct bpfprof_golabels_stack_event* e, __u64 key,
                                         __u64 value) {
  __u32 i = e->count;
  if (i >= BPFPROF_MAX_GO_LABELS) return false;
  /* The mask, in an instruction the compiler keeps, for the verifier: to it a count read back
   * from the map is any number, and the compiler drops a mask it knows to be no-op. */
  asm volatile("%[i] &= 7" : [i] "+r"(i));
  _Static_assert(BPFPROF_MAX_GO_LABELS == 8, "the mask above");
  struct bpfprof_go_label* l = &e->frames[i];
  if (!go_read_string(key, l->key, BPFPROF_GO_LABEL_KEY_BYTES, &l->key_length) ||
      !go_read_string(value, l->value, BPFPROF_GO_LABEL_VALUE_BYTES, &l->value_length))
    return false;
  e->count = i + 1;
  return true;
}

/* The pairs of a label set, keys and values each at a stride from their first; a map's
 * bucket skips the slots its tophash says are empty. Read in a bpf_loop callback, verified once,
 * not in an unrolled loop: each pair's two bounded reads, copied 16 times over, tripled the
 * verifier's work on every program that sends labels. */
struct go_label_pairs {
  struct bpfprof_golabels_stack_event* event;
  __u64 keys;
  __u64 values;
  __u64 stride;
  __u32 count; /* slots to look at */
  bool in_map; /* slots may be empty (tophash) */
  __u8 tophash[8];
};

static long read_go_label_pair(__u64 index, void* context) {
  struct go_label_pairs* pairs = context;
  if (index >= pairs->count) return 1;
  if (pairs->in_map && pairs->tophash[index & 7] < GO_MIN_TOPHASH) return 0;
  if (!go_read_pair(pairs->event, pairs->keys + index * pairs->stride,
                    pairs->values + index * pairs->stride)) {
    pairs->event->status = BPFPROF_GO_LABELS_UNREADABLE;
    return 1;
  }
  return 0;
}

/* 1.24 on: {list []{key, value string}}. */
static __always_inline void go_read_slice(struct bpfprof_golabels_stack_event* e, __u64 list,
                                          __u64 length) {
  if (length > BPFPROF_MAX_GO_LABELS) e->status = BPFPROF_GO_LABELS_TOO_MANY;
  struct go_label_pairs pairs = {
      .event = e,
      .keys = list,
      .values = list + 16,
      .stride = 32,
      .count = length < BPFPROF_MAX_GO_LABELS ? (__u32)length : BPFPROF_MAX_GO_LABELS,
      .in_map = false};
  bpf_loop(BPFPROF_MAX_GO_LABELS, read_go_label_pair, &pairs, 0);
}

/* To 1.23: a map[string]string whose 8 or fewer pairs are in its one bucket (B = 0). */
static __always_inline void go_read_map(struct bpfprof_golabels_stack_event* e, __u64 hmap) {
  __u8 header[16] = {};
  struct go_label_pairs pairs = {.event = e, .stride = 16, .count = 8, .in_map = true};
  if (bpf_probe_read_user(header, sizeof(header), (void*)hmap)) {
    e->status = BPFPROF_GO_LABELS_UNREADABLE;
    return;
  }
  const __u64 buckets = read_user_word(hmap + 16);
  if (header[9] != 0 || !buckets ||
      bpf_probe_read_user(pairs.tophash, sizeof(pairs.tophash), (void*)buckets)) {
    e->status = header[9] != 0 ? BPFPROF_GO_LABELS_TOO_MANY : BPFPROF_GO_LABELS_UNREADABLE;
    return;
  }
  pairs.keys = buckets + GO_MAP_KEYS;
  pairs.values = buckets + GO_MAP_VALUES;
  bpf_loop(8, read_go_label_pair, &pairs, 0);
}

/* Sends the running goroutine's labels with the header of the stack event that follows;
 * nothing for a process that is not a registered Go program or a goroutine without labels. */
static __always_inline void send_golabels_stack(const struct bpfprof_event_header* sample,
                                                __u32 slot, bool walked) {
  (void)slot;
  (void)walked;
  __u32 tgid = sample->pid;
  if (!runtime_processes[BPFPROF_RUNTIME_GOLABELS]) return;
  const struct bpfprof_go_labels_process* p = bpf_map_lookup_elem(&go_labels_processes, &tgid);
  if (!p) return;
  const __u64 set = go_current_labels(p);
  if (!set) return;
  __u32 zero = 0;
  struct bpfprof_golabels_stack_event* e = bpf_map_lookup_elem(&go_labels_scratch, &zero);
  if (!e) return;
  e->header = *sample;
  e->header.kind = BPFPROF_EVENT_GOLABELS_STACK;
  e->set = set;
  e->count = 0;
  e->status = BPFPROF_GO_LABELS_READ;
  const __u64 contents = read_user_word(set);
  struct go_labels_seen_key key = {.set = set, .contents = contents, .tgid = tgid};
  const __u64 now = bpf_ktime_get_ns();
  const __u64* sent = bpf_map_lookup_elem(&go_labels_seen, &key);
  if (sent && now - *sent < GO_LABELS_RESEND_NS) {
    e->status = BPFPROF_GO_LABELS_KNOWN;
  } else if (p->form == BPFPROF_GO_LABELS_SLICE) {
    go_read_slice(e, contents, read_user_word(set + 8));
  } else {
    go_read_map(e, contents);
  }
  if (e->status == BPFPROF_GO_LABELS_READ || e->status == BPFPROF_GO_LABELS_TOO_MANY)
    bpf_map_update_elem(&go_labels_seen, &key, &now, BPF_ANY);
  send_event(e,
             offsetof(struct bpfprof_golabels_stack_event, frames) +
                 (__u64)e->count * sizeof(struct bpfprof_go_label),
             sizeof(*e), tgid);
}

#endif
