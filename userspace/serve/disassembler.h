// Machine code to text, with Capstone: what /asm/v1 answers.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace bpfprof {

struct DisassembledCode {
  std::string syntax;  // "Intel" (x86), "ARM" (aarch64)
  // Each instruction's byte offset from the start and its text ("mov rbp, rsp").
  std::vector<std::pair<uint64_t, std::string>> instructions;
  uint64_t size = 0;  // bytes covered by the instructions
};

// nullopt for an architecture Capstone is not set up for here (`architecture` as
// ElfFile::architecture names it). Stops at the first byte sequence that is no instruction.
std::optional<DisassembledCode> disassemble(std::string_view architecture,
                                            const std::vector<uint8_t>& code, uint64_t address);

}  // namespace bpfprof
