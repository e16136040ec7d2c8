// Capstone's functions as bpfprof calls them, from the library loaded when first used (see
// lazy_library.h). Without the library each reports failure as Capstone would: a handle that
// does not open, an instruction that does not decode.
#include <capstone/capstone.h>

#include "symbols/util/lazy_library.h"

namespace {

constinit bpfprof::LazyLibrary capstone_library(BPFPROF_CAPSTONE_SONAME,
                                                "machine code is not decoded");

}  // namespace

extern "C" {

cs_err cs_open(cs_arch arch, cs_mode mode, csh* handle) {
  static auto* f = capstone_library.function<decltype(cs_open)>("cs_open");
  return f ? f(arch, mode, handle) : CS_ERR_MEM;
}

cs_err cs_close(csh* handle) {
  static auto* f = capstone_library.function<decltype(cs_close)>("cs_close");
  return f ? f(handle) : CS_ERR_HANDLE;
}

cs_err cs_option(csh handle, cs_opt_type type, size_t value) {
  static auto* f = capstone_library.function<decltype(cs_option)>("cs_option");
  return f ? f(handle, type, value) : CS_ERR_HANDLE;
}

size_t cs_disasm(csh handle, const uint8_t* code, size_t code_size, uint64_t address, size_t count,
                 cs_insn** insn) {
  static auto* f = capstone_library.function<decltype(cs_disasm)>("cs_disasm");
  return f ? f(handle, code, code_size, address, count, insn) : 0;
}

void cs_free(cs_insn* insn, size_t count) {
  static auto* f = capstone_library.function<decltype(cs_free)>("cs_free");
  if (f) f(insn, count);
}

cs_insn* cs_malloc(csh handle) {
  static auto* f = capstone_library.function<decltype(cs_malloc)>("cs_malloc");
  return f ? f(handle) : nullptr;
}

bool cs_disasm_iter(csh handle, const uint8_t** code, size_t* size, uint64_t* address,
                    cs_insn* insn) {
  static auto* f = capstone_library.function<decltype(cs_disasm_iter)>("cs_disasm_iter");
  return f ? f(handle, code, size, address, insn) : false;
}

bool cs_insn_group(csh handle, const cs_insn* insn, unsigned int group_id) {
  static auto* f = capstone_library.function<decltype(cs_insn_group)>("cs_insn_group");
  return f ? f(handle, insn, group_id) : false;
}

cs_err cs_regs_access(csh handle, const cs_insn* insn, cs_regs regs_read, uint8_t* regs_read_count,
                      cs_regs regs_write, uint8_t* regs_write_count) {
  static auto* f = capstone_library.function<decltype(cs_regs_access)>("cs_regs_access");
  return f ? f(handle, insn, regs_read, regs_read_count, regs_write, regs_write_count)
           : CS_ERR_HANDLE;
}

}  // extern "C"
