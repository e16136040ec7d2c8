/* record --cgroup: whether a task is inside one of the subtrees in cgroup_filters. */
#ifndef BPFPROF_CGROUP_FILTER_H
#define BPFPROF_CGROUP_FILTER_H

#include "vmlinux.h"

#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>

#include "bpf/events.h"
#include "bpf/knobs.h"
#include "bpf/maps.h"

struct cgroup_filter_search {
  struct task_struct* task;
  bool inside;
};

/* Element `index` of a pointer array at `offset` in a kernel object (an index the compiler's
 * field relocations cannot take), or 0. */
static __always_inline void* kernel_pointer_at(const void* object, __u32 offset, __u32 index) {
  void* value = 0;
  if (bpf_probe_read_kernel(&value, sizeof(value), (const char*)object + offset + index * 8ull))
    return 0;
  return value;
}

/* The task's cgroup in the filter's hierarchy: v2's (dfl_cgrp) or a v1 controller's. */
static __always_inline struct cgroup* task_cgroup_of(struct task_struct* task, __s32 subsys) {
  struct css_set* set = BPF_CORE_READ(task, cgroups);
  if (!set) return 0;
  if (subsys == BPFPROF_CGROUP_V2) return BPF_CORE_READ(set, dfl_cgrp);
  if (subsys < 0 || subsys >= 64) return 0; /* userspace checks it against the kernel's count */
  struct cgroup_subsys_state* css =
      kernel_pointer_at(set, bpf_core_field_offset(set->subsys), (__u32)subsys);
  return css ? BPF_CORE_READ(css, cgroup) : 0;
}

static long check_cgroup_filter(__u64 index, void* context) {
  struct cgroup_filter_search* s = context;
  if (index >= cgroup_filter_count) return 1;
  __u32 key = (__u32)index;
  const struct bpfprof_cgroup_filter* f = bpf_map_lookup_elem(&cgroup_filters, &key);
  if (!f) return 1;
  struct cgroup* cgrp = task_cgroup_of(s->task, f->subsys);
  if (!cgrp || BPF_CORE_READ(cgrp, level) < (int)f->level) return 0;
  struct cgroup* ancestor =
      kernel_pointer_at(cgrp, bpf_core_field_offset(cgrp->ancestors), f->level & 255);
  if (!ancestor) return 0;
  if (BPF_CORE_READ(ancestor, kn, id) != f->id) return 0;
  s->inside = true;
  return 1;
}

static __always_inline bool in_filtered_cgroup(struct task_struct* task) {
  if (!cgroup_filter_count) return false;
  struct cgroup_filter_search s = {.task = task, .inside = false};
  bpf_loop(BPFPROF_MAX_CGROUP_FILTERS, check_cgroup_filter, &s, 0);
  return s.inside;
}

#endif
