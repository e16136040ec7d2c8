// The functions that a file's .eh_frame describes: one [start, end) range per FDE. Every
// compiled function has one (unwinding needs it), also in stripped binaries, so these group
// code that no symbol names.
#pragma once

#include <gelf.h>

#include <cstdint>
#include <vector>

namespace bpfprof {

struct CodeRange {
  uint64_t start = 0;  // file virtual address
  uint64_t end = 0;
};

// The two sections that hold call-frame information: .eh_frame (loaded, what unwinders at
// run time read) and .debug_frame (in unstripped files or separate debug files only).
enum class CfiSection { kEhFrame, kDebugFrame };

// The FDE ranges of `elf`'s .eh_frame (or .debug_frame), sorted by start; empty when it has
// none. Addresses are those of `elf` itself.
std::vector<CodeRange> read_cfi_functions(Elf* elf, CfiSection section = CfiSection::kEhFrame);

// The range of a read_cfi_functions() list holding `vaddr`, or nullptr.
const CodeRange* find_code_range(const std::vector<CodeRange>& ranges, uint64_t vaddr);

}  // namespace bpfprof
