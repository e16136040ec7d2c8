/* HotSpot's maps: the JVMs' entries (userspace writes them) and the state of the walks through
 * their code (runtimes/hotspot/walk.bpf.h), whose Java frames runtimes/hotspot/frames.bpf.h
 * sends. */
#ifndef BPFPROF_HOTSPOT_MAPS_H
#define BPFPROF_HOTSPOT_MAPS_H

#include "vmlinux.h"

#include <bpf/bpf_helpers.h>

#include "runtimes/hotspot/events.h"

/* The JVMs: tgid -> where their code cache and interpreter are and how their blobs and
 * frames are laid out (userspace fills it once a JVM's tables can be read). */
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 4096);
  __type(key, __u32); /* tgid */
  __type(value, struct bpfprof_hotspot_process);
} hotspot_processes SEC(".maps");

/* The Java frames a walk stepped through, per CPU and slot (as unwind_walks), sent before
 * the walk's stack event; `process` is the walked JVM's entry as the walk started, `blob`
 * the header of the blob being stepped through. */
struct hotspot_walk {
  __u32 tid; /* whose walk filled `event` */
  __u32 pad;
  struct bpfprof_hotspot_process process;
  __u8 blob[BPFPROF_HOTSPOT_BLOB_WINDOW];
  struct bpfprof_hotspot_stack_event event;
};

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 2);
  __type(key, __u32);
  __type(value, struct hotspot_walk);
} hotspot_walks SEC(".maps");

#endif
