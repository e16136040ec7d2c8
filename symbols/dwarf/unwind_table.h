// The compact unwind table of one x86-64 ELF file (bpf/unwind_table.h): its call-frame
// information (.eh_frame, else .debug_frame from the file or its separate debug file) turned
// into sorted rows that the BPF unwinder walks, with how much of the file's code the rows
// cover and why the rest is not.
//
// Rows, as built here:
// - RSP / RBP: CFA = sp or bp + cfa_offset, return address at CFA - 8, rbp SAME, AT_CFA
//   (rbp_offset) or UNKNOWN.
// - RBP also over V8's embedded builtins, which no CFI covers (v8_builtins.h): CFA = rbp + 16,
//   rbp AT_CFA -16.
// - PLT: the PLT entries' CFA expression (binutils' 16-byte slots, `(rip & 15) >= 11`),
//   cfa_offset 8. The other variants (IBT's .plt.sec uses `>= 10`) are UNKNOWN.
// - ROOT (return address undefined) and SIGNAL (an 'S' FDE): cfa_offset 0, rbp UNKNOWN; the
//   walk does not use them.
// - UNKNOWN: everything else, offsets 0 and rbp UNKNOWN, also where no FDE covers the code
//   (every FDE that the next one does not start at once is closed by such a row).
// Consecutive identical rows are merged.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "bpf/unwind_table.h"

namespace bpfprof {

using UnwindRow = bpfprof_unwind_row;

// Why code is not covered by a row that the BPF walk can follow.
enum class UnwindGap : uint8_t {
  kNoCfi,          // no FDE in .eh_frame or .debug_frame covers it
  kCfaExpression,  // the CFA is a DWARF expression other than the PLT's
  kCfaRegister,    // the CFA is a register other than rsp and rbp plus an offset
  kReturnAddress,  // the return address is not saved at CFA - 8
  kOffsetRange,    // the CFA offset does not fit the row (32 bits)
  kUnreadableCfi,  // the FDE's instructions could not be read (cfi_rows.h)
};
inline constexpr size_t kUnwindGapKinds = 6;
const char* unwind_gap_name(UnwindGap gap);

// One executable section (.init, .plt, .plt.sec, .text, ...) and how its bytes are covered.
struct SectionCoverage {
  std::string name;
  uint64_t start = 0;  // file virtual addresses
  uint64_t end = 0;
  uint64_t covered_bytes = 0;      // under a row of rule RSP, RBP, PLT, ROOT or SIGNAL
  uint64_t rbp_unknown_bytes = 0;  // of those, how many have rbp rule UNKNOWN
  // Alignment fill (nops, int3) between functions that no FDE covers: not code, so neither
  // covered nor uncovered (in the tables as UNKNOWN rows all the same).
  uint64_t padding_bytes = 0;
  std::array<uint64_t, kUnwindGapKinds> uncovered_bytes{};  // by UnwindGap

  uint64_t code_bytes() const { return end - start - padding_bytes; }
};

struct UnwindTable {
  std::vector<UnwindRow> rows;  // sorted by pc, no two consecutive rows alike
  std::vector<SectionCoverage> coverage;
};

enum class UnwindTableError {
  kUnreadable,        // not a file that libelf/libdwfl can read
  kNotX86_64,         // another machine or a 32-bit file
  kAddressAbove4GiB,  // code beyond what a row's 32-bit pc can say
  kTooManyRows,       // more CFI rows than UnwindTableOptions::max_rows
  kTooSlow,           // not built within UnwindTableOptions::time_limit
  kNotInCache,        // a look-up in the cache only (OnCacheMiss::kReport) found no entry
};
const char* unwind_table_error_name(UnwindTableError error);

using UnwindTableResult = std::variant<UnwindTable, UnwindTableError>;

// Bounds on the work of one file's table. Any user can build a file and map it in a process
// that bpfprof follows, and its CFI may describe as many rows as its bytes allow: unbounded,
// one such file would hold the table builder (and every table queued after it) and fill the
// recorder's memory. A file past a bound gets no table: its samples fall back to stack copies.
//
// Rows (CFI rows as read, before merging): the largest real files met, libLLVM-15 and -14 and
// libclang-cpp-14, have 0.95-1.0 M (16 MB of rows; clang++ maps two, 2.5 M compact rows in
// the kernel). 8 M is eight times libLLVM and the most rows a command's row array grows to;
// at 48 bytes a span, building that many holds under 1 GB.
inline constexpr uint64_t kMaxUnwindTableRows = 8'000'000;
// Time: CPU time of the building thread, so that a loaded machine does not skip real files.
// The largest real tables build in a small fraction of this bound (bench/RESULTS.md, "Unwind
// tables"), which leaves room for slower or busy machines; a crafted file costs at most this
// per recording. At real files' speed the row bound comes before the time bound.
inline constexpr std::chrono::milliseconds kUnwindTableTimeLimit{5000};

struct UnwindTableOptions {
  std::vector<std::string> symbol_dirs;  // also searched for separate debug files
  uint64_t max_rows = kMaxUnwindTableRows;
  std::chrono::nanoseconds time_limit = kUnwindTableTimeLimit;
};

// The table of the file at `path`. With `fd` >= 0 the file is read from that descriptor (the
// caller keeps it) and `path` only names it, e.g. for the debug-file search next to it.
UnwindTableResult build_unwind_table(const std::string& path,
                                     const UnwindTableOptions& options = {}, int fd = -1);

// The row that holds `pc` (a file virtual address) in a sorted table, or nullptr before the
// first row.
const UnwindRow* find_unwind_row(const std::vector<UnwindRow>& rows, uint64_t pc);

// Whether a row's CFA rule is one the BPF walk can follow (all but UNKNOWN).
bool is_usable(const UnwindRow& row);

}  // namespace bpfprof
