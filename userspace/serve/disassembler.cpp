#include "userspace/serve/disassembler.h"

#include <capstone/capstone.h>

namespace bpfprof {

std::optional<DisassembledCode> disassemble(std::string_view architecture,
                                            const std::vector<uint8_t>& code, uint64_t address) {
  DisassembledCode out;
  cs_arch arch;
  cs_mode mode;
  if (architecture == "x86_64") {
    arch = CS_ARCH_X86, mode = CS_MODE_64, out.syntax = "Intel";
  } else if (architecture == "i386" || architecture == "x86") {
    arch = CS_ARCH_X86, mode = CS_MODE_32, out.syntax = "Intel";
  } else if (architecture == "aarch64") {
    arch = CS_ARCH_ARM64, mode = CS_MODE_LITTLE_ENDIAN, out.syntax = "ARM";
  } else {
    return std::nullopt;
  }
  csh handle;
  if (cs_open(arch, mode, &handle) != CS_ERR_OK) return std::nullopt;
  cs_insn* instructions = nullptr;
  const size_t count = cs_disasm(handle, code.data(), code.size(), address, 0, &instructions);
  for (size_t i = 0; i < count; ++i) {
    const cs_insn& instruction = instructions[i];
    std::string text = instruction.mnemonic;
    if (instruction.op_str[0] != '\0') text += std::string(" ") + instruction.op_str;
    out.instructions.emplace_back(instruction.address - address, std::move(text));
    out.size = instruction.address - address + instruction.size;
  }
  if (count > 0) cs_free(instructions, count);
  cs_close(&handle);
  return out;
}

}  // namespace bpfprof
