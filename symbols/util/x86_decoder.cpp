#include "symbols/util/x86_decoder.h"

namespace bpfprof {

X86Decoder::X86Decoder() {
  if (cs_open(CS_ARCH_X86, CS_MODE_64, &handle_) != CS_ERR_OK) {
    handle_ = 0;
    return;
  }
  cs_option(handle_, CS_OPT_DETAIL, CS_OPT_ON);
  insn_ = cs_malloc(handle_);
}

X86Decoder::~X86Decoder() {
  if (insn_) cs_free(insn_, 1);
  if (handle_) cs_close(&handle_);
}

}  // namespace bpfprof
