// A Go binary's unwind spans (unwind_spans.h), from Go's own tables (symbols/go/pclntab.h)
// rather than its CFI, stripped or not: .debug_frame says the same offsets, but not where a
// goroutine's stack ends. Each function's pcsp table gives its CFA; where Go's traceback ends
// (a goroutine's or thread's first function, a switch of stacks) the rule is ROOT; and at the
// switches the kernel walk follows (symbols/go/cgo_switches.h) the rule says how to reach the
// other stack. Code from C objects keeps its CFI.
#pragma once

#include <gelf.h>

#include <vector>

#include "symbols/dwarf/unwind_spans.h"

namespace bpfprof {

// Replaces the spans over a Go binary's functions with spans from Go's tables; leaves a file
// that is not a Go binary, or whose tables do not read, as it is. Stops when the budget is
// spent.
void add_go_spans(Elf* elf, std::vector<UnwindSpan>& spans, UnwindBudget& budget);

}  // namespace bpfprof
