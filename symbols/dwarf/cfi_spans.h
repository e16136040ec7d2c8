// A file's CFI as unwind spans (unwind_spans.h): each FDE's rows (cfi_rows.h) classified into
// the rules the BPF walk follows (bpf/unwind_table.h), or into the reason it cannot follow
// them (UnwindGap). .eh_frame's FDEs come first; .debug_frame's (from the file or its separate
// debug file) fill only the code that .eh_frame does not cover.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "bpf/unwind_table.h"
#include "symbols/dwarf/dwarf_module.h"
#include "symbols/dwarf/unwind_spans.h"

namespace bpfprof {

// The spans of `module`'s CFI, .eh_frame's sorted by address and .debug_frame's after them;
// none past the budget's rows (the budget then says why).
std::vector<UnwindSpan> cfi_spans(const DwarfModule& module, UnwindBudget& budget);

// The rule the BPF walk follows over most of the function whose .eh_frame FDE holds `vaddr`
// in the ELF file open at `fd` (the function's body, past its prologue); nullopt when there is
// none or its CFA is not sp-based. A runtime whose JIT code runs on a VM loop's frame steps that
// code by its loop's body rule.
std::optional<bpfprof_unwind_rule> function_body_rule(int fd, uint64_t vaddr);

}  // namespace bpfprof
