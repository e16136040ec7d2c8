// Names for PLT slots, as objdump gives them: `name@plt`. Stripped executables call every
// library function through them, and without names of their own the slots were named after
// whatever symbol came before (python3.11: XML_SetCharacterDataHandler).
#pragma once

#include <gelf.h>

#include <cstdint>
#include <vector>

#include "symbols/elf/symbol_table.h"

namespace bpfprof {

// One entry per slot of .plt, .plt.sec and .plt.got whose jump goes through a GOT entry
// that a relocation binds to a named function. x86-64 only: other machines get none.
std::vector<SymbolEntry> plt_symbol_entries(Elf* elf, uint16_t machine);

}  // namespace bpfprof
