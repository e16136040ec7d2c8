// x86-64 code read instruction by instruction with Capstone (loaded on demand,
// capstone_on_demand.cpp), its details on: one decoder opened once and used for many reads,
// as opening one costs more than reading a few instructions. A read writes the decoder's one
// instruction buffer: a decoder serves one thread at a time.
#pragma once

#include <capstone/capstone.h>

#include <cstdint>
#include <span>

namespace bpfprof {

class X86Decoder {
 public:
  X86Decoder();
  ~X86Decoder();
  X86Decoder(const X86Decoder&) = delete;
  X86Decoder& operator=(const X86Decoder&) = delete;

  // False when Capstone could not be loaded or opened: every read then decodes nothing.
  bool usable() const { return insn_ != nullptr; }
  // For Capstone's questions about an instruction this decoder gave (groups, registers).
  csh handle() const { return handle_; }

  // How a read ended.
  enum class Read { kStopped, kEnded, kUndecodable };
  // Calls `visit(insn)` (with its details) for each instruction of `code`, at `address`, in
  // order, until it returns true (kStopped), the code ends (kEnded) or an instruction does not
  // decode (kUndecodable; also when the decoder is not usable).
  template <typename Visit>
  Read read(std::span<const uint8_t> code, uint64_t address, Visit visit) const {
    if (!insn_) return Read::kUndecodable;
    const uint8_t* at = code.data();
    size_t left = code.size();
    uint64_t pc = address;
    while (left) {
      if (!cs_disasm_iter(handle_, &at, &left, &pc, insn_)) return Read::kUndecodable;
      if (visit(*insn_)) return Read::kStopped;
    }
    return Read::kEnded;
  }
  // As read: whether `visit` returned true.
  template <typename Visit>
  bool each(std::span<const uint8_t> code, uint64_t address, Visit visit) const {
    return read(code, address, visit) == Read::kStopped;
  }

 private:
  csh handle_ = 0;
  cs_insn* insn_ = nullptr;
};

}  // namespace bpfprof
