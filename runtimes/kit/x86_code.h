// Reading a little x86-64 code of a runtime's binary (with Capstone): where a function loads a
// static from (a RIP-relative operand), which a stripped binary does not name otherwise.
#pragma once

#include <capstone/capstone.h>

#include <cstdint>
#include <optional>
#include <span>

namespace bpfprof {

class X86Decoder {
 public:
  X86Decoder();
  ~X86Decoder();
  X86Decoder(const X86Decoder&) = delete;
  X86Decoder& operator=(const X86Decoder&) = delete;

  // Calls `visit(insn)` (with its details) for each instruction of `code`, at `address`, in
  // order, until it returns true or an instruction does not decode; whether one returned true.
  template <typename Visit>
  bool each(std::span<const uint8_t> code, uint64_t address, Visit visit) {
    if (!insn_) return false;
    const uint8_t* at = code.data();
    size_t left = code.size();
    uint64_t pc = address;
    while (left && cs_disasm_iter(handle_, &at, &left, &pc, insn_))
      if (visit(*insn_)) return true;
    return false;
  }

 private:
  csh handle_ = 0;
  cs_insn* insn_ = nullptr;
};

// The address a RIP-relative memory operand names, if `op` (of `insn`) is one.
std::optional<uint64_t> rip_target(const cs_insn& insn, const cs_x86_op& op);

// The address the first instruction of `code` (at `address`) with a RIP-relative memory
// operand names: `mov static(%rip),%rax` in a function that returns a static.
std::optional<uint64_t> first_rip_target(std::span<const uint8_t> code, uint64_t address);

}  // namespace bpfprof
