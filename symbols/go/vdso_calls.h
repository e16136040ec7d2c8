// Go's callers of the vDSO (time.now, runtime.nanotime1, runtime.vgetrandom1) move sp to the
// system stack (g0) around the call, so Go marks them SPWRITE and its pcsp table no longer
// says where their caller is. Their rbp stays the frame's base all through the switch: this
// finds, in their code, where the caller is at rbp + 16 with its rbp saved at rbp, so that a
// walk from the vDSO goes on into the goroutine that asked for the time.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "symbols/util/code_range.h"

namespace bpfprof::go {

// Whether `name` is one of the runtime's assembly functions that call into the vDSO.
bool calls_vdso(std::string_view name);

// The ranges of a vDSO caller's code (starting at `entry`) where rbp is its frame's base
// (CFA = rbp + 16): from the prologue's `mov %rsp,%rbp` (or `lea d(%rsp),%rbp`) through the
// epilogue's restore of rbp, and the system-call fallback after the return. None where the
// code is not of that shape: the bytes come from any binary.
std::vector<CodeRange> frame_pointer_ranges(uint64_t entry, std::span<const uint8_t> code);

}  // namespace bpfprof::go
