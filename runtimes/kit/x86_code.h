// Reading a little x86-64 code of a runtime's binary (with Capstone): where a function loads a
// static from (a RIP-relative operand), which a stripped binary does not name otherwise.
#pragma once

#include <capstone/capstone.h>

#include <cstdint>
#include <optional>
#include <span>

#include "symbols/util/x86_decoder.h"

namespace bpfprof {

// The address a RIP-relative memory operand names, if `op` (of `insn`) is one.
std::optional<uint64_t> rip_target(const cs_insn& insn, const cs_x86_op& op);

// The address the first instruction of `code` (at `address`) with a RIP-relative memory
// operand names: `mov static(%rip),%rax` in a function that returns a static.
std::optional<uint64_t> first_rip_target(std::span<const uint8_t> code, uint64_t address);

}  // namespace bpfprof
