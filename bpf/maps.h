/* Every map of the BPF programs, with the values they hold, and their global data (.bss),
 * in one place: the ring buffers, the tracked processes, loss counters, the events' scratch
 * space, off-CPU and waker state, stack copies, the in-kernel walker's tables and state, and
 * what the runtimes share; each runtime's own maps are in its folder (runtimes/<name>/).
 * Userspace finds them by these names (bpf_programs.cpp, the runtimes' kernel maps). */
#ifndef BPFPROF_MAPS_H
#define BPFPROF_MAPS_H

#include "vmlinux.h"

#include <bpf/bpf_helpers.h>

#include "bpf/events.h"
#include "bpf/unwind_maps.h"
#include "bpf/unwind_table.h"

/* Ring buffers. */

struct {
  __uint(type, BPF_MAP_TYPE_RINGBUF);
  __uint(max_entries, 16 * 1024 * 1024);
} events SEC(".maps");

/* Forks, execs, exits and renames have a ring buffer of their own: when samples flood the
 * main one, the processes and threads they belong to must still be known. */
struct {
  __uint(type, BPF_MAP_TYPE_RINGBUF);
  __uint(max_entries, 1024 * 1024);
} lifecycle_events SEC(".maps");

/* Which processes are recorded. */

struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 65536); /* set before load: record --max-processes */
  __type(key, __u32);         /* tgid */
  __type(value, __u8);
} tracked_processes SEC(".maps");

/* record --cgroup's subtrees (cgroup_filter_count of them). */
struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, BPFPROF_MAX_CGROUP_FILTERS);
  __type(key, __u32);
  __type(value, struct bpfprof_cgroup_filter);
} cgroup_filters SEC(".maps");

/* Children that could not be followed: tracked_processes was full (record --max-processes). */
struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, __u64);
} processes_not_followed SEC(".maps");

/* A new tracked process (fork or exec) wakes the reader, at most once per 5 ms: until it has
 * passed the process's mappings to the kernel walker, the process's samples fall back to
 * stack copies. Without the kernel walker nothing waits for the mappings. */
__u64 last_new_process_wakeup_ns = 0;

/* Losses. */

/* Events that did not fit in the ring buffer, per CPU: counted, never hidden. */
struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, __u64);
} lost_events SEC(".maps");

/* Their total, in .bss: userspace reads it through its mapping of the section at every poll,
 * without a system call; losses are rare, so the shared atomic costs nothing. */
__u64 lost_events_total = 0;

/* record --memory: each process's resident bytes (file + anon + shmem) as last sent. */
struct {
  __uint(type, BPF_MAP_TYPE_LRU_HASH);
  __uint(max_entries, 16384);
  __type(key, __u32); /* tgid */
  __type(value, __u64);
} memory_sent SEC(".maps");

/* record --memory: per CPU, the address space and resident pages the rss_stat program last
 * saw. The tracepoint fires at each page mapped, but the counters it reads (percpu_counter's
 * total) move only when a CPU's batch of 32 pages is folded in: the calls between see the
 * same values and end here, before any hash lookup. */
struct rss_seen {
  __u64 mm;
  __s64 pages;
};
struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct rss_seen);
} rss_last_seen SEC(".maps");

/* The same, per process (tgid), so the loss can be shown where it happened. */
struct {
  __uint(type, BPF_MAP_TYPE_LRU_HASH);
  __uint(max_entries, 16384);
  __type(key, __u32);
  __type(value, __u64);
} lost_events_by_process SEC(".maps");

/* Scratch space: events exceed the 512-byte BPF stack, and are built in map values. Each
 * has a slot for the sampling program and one for sched_switch and sched_waking, which run
 * with interrupts off (never within each other) but can be interrupted by a sample. The
 * allocator's uprobe programs use the second too (see slot_uses). */
#define SAMPLE_SLOT 0
#define TRACEPOINT_SLOT 1

/* Each slot's uses on the CPU, counted at their start. The allocator's uprobe programs share
 * the tracepoints' slot but run preemptible, with interrupts on: a switch, a waking in an
 * interrupt or another thread's uprobe can take the slot in the middle of their walk, and the
 * count tells them. */
struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 2);
  __type(key, __u32);
  __type(value, __u64);
} slot_uses SEC(".maps");

/* Stack events whose user stack is a list of frames, per CPU and slot. */
struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 2);
  __type(key, __u32);
  __type(value, struct bpfprof_frames_event);
} frames_scratch SEC(".maps");

/* Stack events with a stack copy, keyed by CPU number * 2 + slot (sized to the possible CPUs
 * before load): a per-CPU array's values are limited to 32 KiB, too small for a 64 KiB copy. */
struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, 2);
  __type(key, __u32);
  __type(value, struct bpfprof_copy_event);
} copy_scratch SEC(".maps");

/* Stack copies. */

/* Larger stack copies for the processes that need them: userspace raises a process's size
 * when its stacks are cut at the copy's end (a frame of tens of KB, deep stacks). */
struct {
  __uint(type, BPF_MAP_TYPE_LRU_HASH);
  __uint(max_entries, 16384);
  __type(key, __u32);   /* tgid */
  __type(value, __u32); /* bytes */
} stack_copy_bytes_by_process SEC(".maps");

/* The sizes learnt per executable file (userspace/capture/stack_copy_sizer.h), for an exec to
 * take at once: a short-lived child's first samples come before userspace reads its exec. */
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 4096);
  __type(key, struct bpfprof_file_key);
  __type(value, __u32); /* bytes */
} stack_copy_bytes_by_file SEC(".maps");

/* Off-CPU stacks. */

/* The thread last sampled on each CPU during its current stretch there: without off-CPU
 * stacks, only such a thread needs a switch-out event (to end its last sampled stack). */
struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, __u32);
} sampled_tid SEC(".maps");

/* A thread leaving the CPU: when, where its user registers were, and whether its kernel stack
 * is worth taking (kernel_stack_worth_taking). */
struct off_cpu_stop {
  __u64 time_ns;
  __u64 user_pc;
  __u64 user_sp;
  __u32 with_kernel_stack;
  /* --no-off-cpu: preempted after a sample, so its next stop is marked too (on_switch) */
  __u32 owes_stop_mark;
};

/* The stop of the thread leaving the CPU now, per CPU: in a map value, whose contents the
 * verifier does not track, rather than on the BPF stack, where each of its fields' values
 * would double the paths verified after it. */
struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct off_cpu_stop);
} current_stop SEC(".maps");

/* Each thread's last stop whose off-CPU stacks were taken. */
struct {
  __uint(type, BPF_MAP_TYPE_TASK_STORAGE);
  __uint(map_flags, BPF_F_NO_PREALLOC);
  __type(key, int);
  __type(value, struct off_cpu_stop);
} off_cpu_stack_taken SEC(".maps");

/* Wakers. */

/* When the waker's stack of each (waker, wakee) pair was last taken: a producer waking its
 * consumer a hundred thousand times a second needs one stack per interval, not each time. */
struct waker_pair {
  __u32 waker_tid; /* 0 for an interrupt */
  __u32 context;   /* enum bpfprof_waker_context */
  __u32 wakee_tid;
  __u32 reserved;
};
struct {
  __uint(type, BPF_MAP_TYPE_LRU_HASH);
  __uint(max_entries, 65536);
  __type(key, struct waker_pair);
  __type(value, __u64);
} waker_stack_taken SEC(".maps");

/* The in-kernel walker (unwind_user.h). */

/* Every loaded table's rows, pages and the rules they name (bpf/unwind_table.h), each table's
 * one after the other (userspace writes rows and pages through mmap: a file's are written once
 * and never move). The rows are one array in chunks (bpf/unwind_maps.h) that userspace adds
 * as tables need room, up to the outer array's size: a command's few libraries take one. */
/* Sizes, not types: the block type, reached only through this pointer-only definition, would
 * be a forward declaration in the object's BTF. */
struct unwind_row_chunk {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(map_flags, BPF_F_MMAPABLE);
  __uint(max_entries, BPFPROF_UNWIND_CHUNK_BLOCKS);
  __uint(key_size, sizeof(__u32));
  __uint(value_size, sizeof(struct bpfprof_unwind_row_block));
};

struct {
  __uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
  __uint(max_entries, 1);
  __type(key, __u32);
  __array(values, struct unwind_row_chunk);
} unwind_rows SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(map_flags, BPF_F_MMAPABLE);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct bpfprof_unwind_page);
} unwind_pages SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct bpfprof_unwind_rule);
} unwind_rules SEC(".maps");

/* Each process's executable mappings (tgid -> sorted array), written by userspace. */
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(map_flags, BPF_F_NO_PREALLOC);
  __uint(max_entries, 8192);
  __type(key, __u32);
  __type(value, struct bpfprof_process_mappings);
} unwind_processes SEC(".maps");

/* The tables of loaded files by the name a VMA gives them (bpf/unwind_maps.h). */
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, BPFPROF_MAX_FILE_TABLES);
  __type(key, struct bpfprof_file_key);
  __type(value, struct bpfprof_file_table);
} unwind_files SEC(".maps");

/* Why walks fell back or were cut, per CPU (enum bpfprof_unwind_fallback). */
struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, BPFPROF_FALLBACK_REASONS);
  __type(key, __u32);
  __type(value, __u64);
} unwind_fallbacks SEC(".maps");

#define STACK_WINDOW_BYTES 4096

/* A walk's registers live in a map value, not on the BPF stack: the verifier does not track
 * a map value's contents, so bpf_loop's callback is verified once, not per frame. */
#define FRAME_BP_ANONYMOUS_CODE 1ull
struct unwind_walk {
  __u64 pc;
  __u64 sp;
  __u64 bp;
  __u32 depth;
  __u32 result;   /* enum walk_result */
  __u32 reason;   /* enum bpfprof_unwind_fallback, for WALK_FALLBACK */
  __u32 exact;    /* pc is not a return address (the leaf, a frame a signal interrupted) */
  __u32 bump;     /* record pc + 1: a signal-interrupted pc, nudged like a return address */
  __u32 bp_known; /* bp holds the frame's rbp (not so after a row with BPFPROF_RBP_UNKNOWN) */
  __u64 leaf_ax;  /* the leaf's rax: 0 in a child just out of clone */
  __u64 leaf_di;  /* the leaf's rdi: vfork's return address (BPFPROF_CFA_RSP_RETURN_IN_RDI) */
  __u64 leaf_bx;  /* the leaf's rbx */
  /* Where the frame's rbx is: 0 while it is the leaf's (in leaf_bx), else the stack address
   * a callee saved it at; read only by a BPFPROF_CFA_RBX frame (bpf/unwind_table.h). */
  __u64 bx_slot;
  __u32 bx_known; /* not so after a row with rbx_rule BPFPROF_RBP_UNKNOWN */
  /* The process's anonymous code found from its VMA is walked by frame pointers
   * (BPFPROF_PROCESS_JIT_FRAME_POINTERS). */
  __u32 jit_frame_pointers;
  __u32 pad3;
  /* The walked thread (struct task_struct *): its thread pointer finds Go's g
   * (BPFPROF_CFA_GO_CGO_CALLBACK). */
  __u64 task;
  /* The frame's rule and the ELF address it was found for (copied here from the cache or the
   * table, so that the verifier sees one path into table_step); from the cache, only the
   * address's low 4 bits, all that a step uses. */
  struct bpfprof_unwind_rule row;
  __u32 pad4;
  __u64 elf_pc;
  /* The frame's mapping, copied here from the process's value or from vma_mapping (one path
   * on for the verifier: it does not track a map value's contents). */
  struct bpfprof_exec_mapping frame_mapping;
  __u32 frame_mapping_from_vma; /* its rows are not cached: no generation covers them */
  __u32 pad2;
  /* The last mapping found from a VMA (not in the process's value), kept for the walk. */
  struct bpfprof_exec_mapping vma_mapping;
  /* Stack bytes read at once: a helper call per word costs more than a few hundred bytes'
   * copy, and the next frames' words lie just above (see read_stack_word). */
  __u64 window_start;
  __u32 window_len;
  __u32 pad;
  __u8 window[STACK_WINDOW_BYTES];
  /* Each recorded frame's rbp (0: not known), bit 0 set for a pc in anonymous code (JIT):
   * where V8's frames keep their function (runtimes/v8/frames.bpf.h). */
  __u64 frame_bp[BPFPROF_UNWOUND_INDEX_MASK + 1];
};

/* A slot per program, as the scratch space's. */
struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 2);
  __type(key, __u32);
  __type(value, struct unwind_walk);
} unwind_walks SEC(".maps");

/* Rows found for pcs, per CPU, direct-mapped by pc: a stack's callers repeat from sample to
 * sample (and a recursion's within one), so do a hot loop's leaves, and a hit skips the two
 * binary searches (mapping, then row), whose loads miss the cache in a row array of
 * megabytes. Keyed by the pc and whether it is exact (a leaf: its own row, not its call
 * site's; bit 63, above every user address).
 * An entry holds a copy of the row, valid for the process-mappings generation that filled
 * it; a slot per program (sample, sched_switch) so that one interrupting the other cannot
 * mix an entry. */
#define ROW_CACHE_BITS 10
struct row_cache_entry {
  __u64 key;          /* row_cache_key() */
  __u32 generation;   /* bpfprof_process_mappings.generation; 0: empty */
  __u32 elf_pc_phase; /* the ELF address's low 4 bits: all a step uses of it (a PLT slot's) */
  struct bpfprof_unwind_rule row;
  __u32 pad;
};
_Static_assert(sizeof(struct row_cache_entry) == 32, "two entries a cache line");

/* The CPUs' caches one after the other (BPFPROF_ROW_CACHE_CPU_ENTRIES each; userspace sizes
 * it to the possible CPUs): a plain array, not a per-CPU one, whose lookup loads the entry's
 * per-CPU pointer from another line first. Mmapable for its page-aligned values: a 32-byte
 * entry then never straddles two cache lines. A walk touches one line a frame. */
struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(map_flags, BPF_F_MMAPABLE);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct row_cache_entry);
} row_cache SEC(".maps");

/* A new image's mappings, written at its exec and mmaps (image_mappings_write) until
 * userspace writes its own entry: a per-CPU scratch value, 10 KB, too large for the BPF
 * stack. `scanned` lives here too: the verifier does not track a map value's contents, so
 * the VMA iterator's loop converges at once instead of being walked VMA by VMA. */
struct image_scan {
  __u32 scanned;
  __u32 pad;
  struct bpfprof_process_mappings list;
};

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct image_scan);
} image_scan_scratch SEC(".maps");

/* Entries written here, not by userspace: their generations have the top bit
 * (BPFPROF_KERNEL_WRITTEN_GENERATION), which userspace's never have, so the row cache never
 * mixes the two; then the CPU and a count of its writes, unique without an atomic (which this
 * BPF target lacks) for 2^24 writes per CPU (execs and young images' mmaps), far longer than
 * a row cache entry lives. */
struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, __u32);
} image_generations SEC(".maps");

/* The runtimes (bpf/runtime_list.h): each one's own maps are in its folder
 * (runtimes/<name>/), what they share is here. How many processes of each runtime (enum
 * bpfprof_runtime) its map holds (userspace keeps these, through the mmapped .bss): with none, a
 * sample skips the runtime's lookup (a cache miss at every sample). */
__u32 runtime_processes[BPFPROF_RUNTIMES] = {};

/* record --allocations: each thread's countdown of bytes to its next sampled allocator call,
 * and the call sampled at its entry, until it returns. */
struct allocating_thread {
  __s64 countdown;
  __u64 bytes;         /* the call's request, once sampled (0: none pending) */
  __u64 freed_address; /* realloc: its old block, when that one was sampled */
  __u64 freed_bytes;
  __u64 block_at; /* posix_memalign: where it stores the block's address */
  /* Between an allocating call's entry and its return: glibc's memalign calls malloc itself
   * for small alignments, and that call is not counted again. */
  __u64 in_call;
};
struct {
  __uint(type, BPF_MAP_TYPE_LRU_HASH);
  __uint(max_entries, 65536);
  __type(key, __u32); /* tid */
  __type(value, struct allocating_thread);
} allocating_threads SEC(".maps");

/* The sampled blocks not yet freed, by process and address: the bytes asked for. Allocated up
 * front (sized by userspace: 1 entry without --allocations): an element allocated as needed
 * fails when the CPU's cache of them runs dry, and a block missing here has its free unseen. A
 * block sampled while the table is full is not sent. */
struct sampled_block {
  __u32 tgid;
  __u32 reserved;
  __u64 address;
};
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 1);
  __type(key, struct sampled_block);
  __type(value, __u64);
} sampled_blocks SEC(".maps");

/* record --memory: each thread's countdown of address-space bytes to its next sampled system
 * call, and the call in progress (from its entry to its exit). */
struct address_space_call {
  __s64 countdown;
  __u64 length;     /* mmap's, munmap's; mremap's new length */
  __u64 address;    /* munmap's and mremap's range; brk: the heap's end at the entry */
  __u64 old_length; /* mremap */
  __u32 call;       /* enum bpfprof_address_space_call; 0: none in progress */
  __u32 reserved;
};
struct {
  __uint(type, BPF_MAP_TYPE_TASK_STORAGE);
  __uint(map_flags, BPF_F_NO_PREALLOC);
  __type(key, int);
  __type(value, struct address_space_call);
} address_space_calls SEC(".maps");

#endif
