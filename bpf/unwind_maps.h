/* The in-kernel unwinder's view of a process's executable mappings, shared by the BPF walker
 * (bpf/unwind_user.h) and userspace (capture/kernel_unwind keeps it in sync with the MMAP2
 * side band, exec, fork and exit). Plain C, fixed-size fields only.
 *
 * Userspace writes one value per process (tgid): its executable mappings sorted by start,
 * each saying how the walker steps through a frame whose pc lies in it. The pages a mapping
 * points to, their rows and the rules those name live in three global arrays (struct
 * bpfprof_unwind_page, _entry and _rule, bpf/unwind_table.h); a file's pages and rows are
 * loaded once and shared by every process that maps it, rules by every file. */
#ifndef BPFPROF_UNWIND_MAPS_H
#define BPFPROF_UNWIND_MAPS_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

#include "bpf/unwind_table.h"

/* Mappings per process the walker knows; a process with more executable mappings keeps the
 * lowest ones, and a pc in the others falls back to a stack copy (counted in userspace).
 * 256 mappings are a 10 KiB value; python3.11 with its extension modules maps ~40. */
#define BPFPROF_MAX_PROCESS_MAPPINGS 256
/* Binary search steps over the mappings: 2^9 > BPFPROF_MAX_PROCESS_MAPPINGS. */
#define BPFPROF_MAPPING_SEARCH_STEPS 9
/* Binary search steps over a page's rows: at most one a byte, 2^16. */
#define BPFPROF_ROW_SEARCH_STEPS 17
/* The row array is made of blocks of this many rows: an array map's elements take 8 bytes
 * at least, a row 4. Through the map's shared mapping userspace sees one flat row array. */
#define BPFPROF_UNWIND_BLOCK_ROWS 4096
struct bpfprof_unwind_row_block {
  struct bpfprof_unwind_entry rows[BPFPROF_UNWIND_BLOCK_ROWS];
};
/* Blocks are kept in chunks of this many (1 Mi rows, 4 MiB), each an array map of its own
 * in the outer array unwind_rows: the row array grows a chunk at a time. */
#define BPFPROF_UNWIND_CHUNK_BLOCKS 256
#define BPFPROF_UNWIND_CHUNK_ROWS (BPFPROF_UNWIND_CHUNK_BLOCKS * BPFPROF_UNWIND_BLOCK_ROWS)
/* Pages of every loaded table (64 KiB of code each: 4 GiB of code in all) and distinct rules
 * of every loaded table (a rule's index is 16 bits; a whole machine's tables have a few
 * thousand). */
#define BPFPROF_UNWIND_PAGE_CAPACITY 65536
#define BPFPROF_UNWIND_RULE_CAPACITY 32768

/* How the walker steps through a frame whose pc lies in a mapping. */
enum bpfprof_mapping_kind {
  /* The file's table is loaded: first_page/page_count/page_base say where. */
  BPFPROF_MAPPING_TABLE = 1,
  /* Code without call-frame information (anonymous memory: JIT code; a file without
   * .eh_frame): follow the frame-pointer chain, as libdwfl does for such code. */
  BPFPROF_MAPPING_FRAME_POINTERS = 2,
  /* The file's table is not loaded (yet: it is being built; or it could not be, or the row
   * array is full): the sample falls back to a stack copy unwound in userspace. */
  BPFPROF_MAPPING_FALLBACK = 3,
  /* Code whose frames a runtime's own step knows (a JIT's code cache without CFI or frame
   * pointers): the BPF side's, from the runtimes at a walk's start (bpf/runtime_code.h);
   * userspace never writes it. */
  BPFPROF_MAPPING_RUNTIME_CODE = 4,
};

/* Why a walk gave up and the sample fell back to a stack copy, or was cut (counted per CPU
 * in the unwind_fallbacks map, reported at the end). */
enum bpfprof_unwind_fallback {
  BPFPROF_FALLBACK_NO_PROCESS = 0,  /* the process's mappings are not in the kernel yet */
  BPFPROF_FALLBACK_UNMAPPED = 1,    /* a pc in no known executable mapping */
  BPFPROF_FALLBACK_NOT_LOADED = 2,  /* a pc in a file whose table is not loaded */
  BPFPROF_FALLBACK_UNKNOWN_ROW = 3, /* no row, or a row no rule covers */
  BPFPROF_FALLBACK_READ = 4,        /* a stack read failed (page not present) */
  /* Not a fallback: a stack deeper than BPFPROF_MAX_UNWOUND_FRAMES, cut there (its innermost
   * frames are sent; counted here with the walks that did not reach a root). */
  BPFPROF_WALK_CUT_AT_DEPTH = 5,
  BPFPROF_FALLBACK_BAD_FRAME = 6,     /* a frame that goes nowhere: CFA below sp, pc 0 */
  BPFPROF_FALLBACK_FRAME_POINTER = 7, /* rbp needed but unknown, or a broken chain */
  BPFPROF_FALLBACK_REASONS = 8,
};

struct bpfprof_exec_mapping {
  __u64 start;      /* first address */
  __u64 end;        /* one past the last */
  __u64 bias;       /* ELF virtual address = address - bias */
  __u32 first_page; /* in the page array: the page of ELF addresses page_base << 16 on */
  __u32 page_count;
  __u32 kind;      /* enum bpfprof_mapping_kind */
  __u32 page_base; /* the table's first page: its lowest ELF address >> 16 */
};

/* The generations of entries the BPF side writes (a young image's, from its VMAs) have this
 * bit; userspace's never do. */
#define BPFPROF_KERNEL_WRITTEN_GENERATION 0x80000000u

/* What a process's code is, beyond its mappings (bpfprof_process_mappings.flags). */
enum bpfprof_process_flag {
  /* The process runs V8 (it maps a file with V8's symbols: Node.js, Chromium), whose JIT code
   * in anonymous executable memory keeps frame-pointer frames: a pc in such memory that the
   * mappings do not hold yet (JIT code mapped since userspace last wrote them) is found from
   * its VMA and walked by frame pointers, as the mappings' own anonymous code is. */
  BPFPROF_PROCESS_JIT_FRAME_POINTERS = 1,
};

struct bpfprof_process_mappings {
  __u32 count;
  /* Unique to this write of this process's mappings (never 0): the walker's per-CPU cache of
   * rows found for pcs is valid only for the generation that filled it. */
  __u32 generation;
  /* When the BPF side wrote it (CLOCK_MONOTONIC ns); 0 in userspace's. Userspace does not
   * replace an entry written after the mappings it has read (kernel_unwind.cpp). */
  __u64 kernel_written_ns;
  __u32 flags; /* enum bpfprof_process_flag bits; 0 in the BPF side's */
  __u32 reserved;
  struct bpfprof_exec_mapping mappings[BPFPROF_MAX_PROCESS_MAPPINGS];
};

/* A file whose rows are loaded, named as a VMA names it: the superblock's device number in
 * the kernel's encoding (major << 20 | minor) and the inode number. Where a pc lies in no
 * mapping of the process's value (its first milliseconds, before userspace has read its
 * mappings; a library just mapped), the walker looks the pc's VMA up and finds the table of
 * its file here (userspace writes one entry per loaded table). */
struct bpfprof_file_key {
  __u64 dev;
  __u64 inode;
};

struct bpfprof_file_table {
  __u32 first_page; /* as struct bpfprof_exec_mapping's */
  __u32 page_count;
  /* p_vaddr - p_offset of the file's executable segment: ELF virtual address = file offset
   * + this (files whose executable segments disagree get no entry). */
  __u64 vaddr_minus_offset;
  __u32 page_base;
  __u32 reserved;
};

#define BPFPROF_MAX_FILE_TABLES 4096

/* Entries of the walker's row cache per CPU (a slot per program: 2 << 10). */
#define BPFPROF_ROW_CACHE_CPU_ENTRIES 2048

#endif
