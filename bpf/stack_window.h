/* The walk's reads of the user stack: a window of stack bytes read at once (a helper call per
 * word costs more than a few hundred bytes' copy), read again only for a word outside it. */
#ifndef BPFPROF_STACK_WINDOW_H
#define BPFPROF_STACK_WINDOW_H

#include "vmlinux.h"

#include <bpf/bpf_helpers.h>

#include "bpf/maps.h"

/* How far below the word asked for a window starts: a frame's saved rbp lies below its
 * return address, read first. */
#define STACK_WINDOW_BELOW 64

/* The word at a window offset, in one load. Stack words are 8-aligned as a rule, but nothing
 * here relies on it: x86 loads an unaligned word, and the verifier checks alignment only where
 * the architecture needs it (BPF_F_STRICT_ALIGNMENT). A memcpy from the byte array would
 * compile to eight byte loads with shifts and ors. */
static __always_inline __u64 window_load(const struct unwind_walk* w, __u64 offset) {
  return *(const __u64*)(w->window + offset);
}

/* The window of stack bytes read again around addr (never across a page, so that it fails
 * only where a read of the word would), then the word: for a word outside the window. A
 * global function: the verifier checks it once, not at each of the walk's reads. */
__noinline long refill_stack_window(struct unwind_walk* w, __u64 addr, __u64* out) {
  if (!w || !out) return -1;
  __u64 page = addr & ~4095ull;
  __u64 start = addr - STACK_WINDOW_BELOW < page ? page : addr - STACK_WINDOW_BELOW;
  __u64 len = page + 4096 - start;
  if (len > STACK_WINDOW_BYTES) len = STACK_WINDOW_BYTES;
  w->window_len = 0;
  if (addr - start + 8 > len || bpf_probe_read_user(w->window, len, (void*)start))
    return bpf_probe_read_user(out, 8, (void*)addr); /* a word across pages: read alone */
  w->window_start = start;
  w->window_len = len;
  __u64 offset = addr - start;
  if (offset > STACK_WINDOW_BYTES - 8) return -1;
  *out = window_load(w, offset);
  return 0;
}

/* The user stack's 8 bytes at addr if the walk's window holds them. */
static __always_inline bool window_word(const struct unwind_walk* w, __u64 addr, __u64* out) {
  const __u64 offset = addr - w->window_start;
  if (addr < w->window_start || offset + 8 > w->window_len || offset > STACK_WINDOW_BYTES - 8)
    return false;
  *out = window_load(w, offset);
  return true;
}

/* The user stack's 8 bytes at addr, from the walk's window of stack bytes; the call that
 * reads the window again only when the word lies outside it (most words do not: a frame's
 * return address and saved rbp lie just above the last ones read). 0 on success, as
 * bpf_probe_read_user. */
static __always_inline long read_stack_word(struct unwind_walk* w, __u64 addr, __u64* out) {
  return window_word(w, addr, out) ? 0 : refill_stack_window(w, addr, out);
}

#endif
