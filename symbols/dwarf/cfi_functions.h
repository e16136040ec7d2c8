// The functions that a file's .eh_frame describes: one [start, end) range per FDE. Every
// compiled function has one (unwinding needs it), also in stripped binaries, so these group
// code that no symbol names.
#pragma once

#include <gelf.h>

#include <cstdint>
#include <span>
#include <vector>

#include "symbols/util/code_range.h"

namespace bpfprof {

// The two sections that hold call-frame information: .eh_frame (loaded, what unwinders at
// run time read) and .debug_frame (in unstripped files or separate debug files only).
enum class CfiSection { kEhFrame, kDebugFrame };

// The section that holds `elf`'s .eh_frame (or .debug_frame), compressed or not; nullptr when
// it has none.
Elf_Scn* cfi_section(Elf* elf, CfiSection which);

// The FDE ranges of `elf`'s .eh_frame (or .debug_frame), sorted by start; empty when it has
// none. Addresses are those of `elf` itself.
std::vector<CodeRange> read_cfi_functions(Elf* elf, CfiSection section = CfiSection::kEhFrame);

// One FDE with what its CFI program needs of its CIE.
struct CfiFde {
  CodeRange range;
  std::span<const uint8_t> cie_program;  // the CIE's initial instructions
  std::span<const uint8_t> program;      // the FDE's instructions
  uint64_t code_alignment = 1;
  int64_t data_alignment = 1;
  bool signal_frame = false;  // augmentation 'S': a signal handler's frame
  // False where an augmentation without 'z' that libdw does not size hides where the
  // instructions start (the range is still right).
  bool program_known = true;
};

// The FDEs of `elf`'s .eh_frame (or .debug_frame) whose range and program can be read, sorted
// by start (a section lists them in any order: lld's files do), the section's order kept
// among those that start at one address.
std::vector<CfiFde> read_fdes(Elf* elf, CfiSection section);

// The range of a read_cfi_functions() list holding `vaddr`, or nullptr.
const CodeRange* find_code_range(const std::vector<CodeRange>& ranges, uint64_t vaddr);

}  // namespace bpfprof
