#include "runtimes/kit/x86_code.h"

namespace bpfprof {

std::optional<uint64_t> rip_target(const cs_insn& insn, const cs_x86_op& op) {
  if (op.type != X86_OP_MEM || op.mem.base != X86_REG_RIP || op.mem.index != X86_REG_INVALID)
    return std::nullopt;
  return insn.address + insn.size + static_cast<uint64_t>(op.mem.disp);
}

std::optional<uint64_t> first_rip_target(std::span<const uint8_t> code, uint64_t address) {
  X86Decoder decoder;
  std::optional<uint64_t> target;
  decoder.each(code, address, [&](const cs_insn& insn) {
    const cs_x86& x86 = insn.detail->x86;
    for (uint8_t i = 0; i < x86.op_count && !target; ++i)
      target = rip_target(insn, x86.operands[i]);
    return target.has_value();
  });
  return target;
}

}  // namespace bpfprof
