// The one stub of opcache's JIT code (x86-64) that runs with sp below execute_ex's: trace_exit,
// which a trace's exit jumps to after pushing its exit number, saves the registers below sp
// (`sub $0xf8,%rsp`), calls the C function that handles the exit and restores sp
// (`add $0x100,%rsp`: the registers and the pushed number). The stubs come first in the JIT
// buffer, written when opcache starts; the buffer is the process's to write, so this is a
// bounded scan of untrusted bytes.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

namespace bpfprof {

// Where sp is `moved_by` below the loop's: [start, end), offsets in the scanned bytes.
struct PhpMovedStretch {
  uint64_t start = 0;
  uint64_t end = 0;
  uint32_t moved_by = 0;
};

// The bytes of the JIT buffer's start that are scanned for it.
inline constexpr size_t kPhpJitStubBytes = 16 * 1024;

// trace_exit in `code` (the JIT buffer's first bytes): a `sub $N,%rsp` of a register save area
// (N >= 0x80), an indirect call, and the `add $M,%rsp` (M = N or N + 8) after it, within 1 KiB;
// the stretch from the sub to the add, inclusive. nullopt without it.
std::optional<PhpMovedStretch> find_trace_exit(std::span<const uint8_t> code);

}  // namespace bpfprof
