// The rules for turning symbol-table entries into a function table, shared by the two
// readers (ElfFile: .symtab/.dynsym; DwarfModule: libdwfl's tables incl. MiniDebugInfo), so
// that both agree on which symbols name code and how far each one reaches.
#pragma once

#include <gelf.h>

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "symbols/elf/elf_file.h"

namespace bpfprof {

// A table entry that names code, before aliases are merged and sizes bounded.
struct SymbolEntry {
  uint64_t address = 0;
  uint64_t size = 0;
  std::string name;
  int binding_rank = 0;      // lower is preferred as display name among aliases
  uint64_t section_end = 0;  // sh_addr + sh_size of its section; 0 when unknown
};

// Binding rank given to names bpfprof makes up (name@plt, _start): any real alias wins.
inline constexpr int kSyntheticBindingRank = 3;

// The entry for `symbol` if it names code, else nullopt: undefined (SHN_UNDEF) symbols
// never do (in an executable their value is a PLT slot, not their code), nor data, nor
// ARM/RISC-V mapping symbols. `section_index` is st_shndx with SHN_XINDEX resolved.
std::optional<SymbolEntry> code_symbol_entry(Elf* elf, const GElf_Sym& symbol, size_t section_index,
                                             std::string_view name);

// What a crafted symbol table can make us hold: a table may point every entry at one huge
// name. Names are cut at kMaxNameBytes (real mangled names stay far below), and all names
// of a table together may take `limit` bytes, past which the rest of the table is left.
class SymbolNameBudget {
 public:
  static constexpr size_t kMaxNameBytes = 64 * 1024;
  explicit SymbolNameBudget(uint64_t limit) : left_(limit) {}
  // `name` cut to kMaxNameBytes, empty for none; nullopt once the budget is used up.
  std::optional<std::string_view> take(const char* name) {
    const std::string_view cut(name ? name : "", name ? strnlen(name, kMaxNameBytes) : 0);
    if (cut.size() > left_) return std::nullopt;
    left_ -= cut.size();
    return cut;
  }

 private:
  uint64_t left_;
};

// Sorted by address, one per address (aliases merged), each size-0 symbol widened to reach
// at most the next symbol and never past its own section's end.
std::vector<Symbol> build_symbol_table(std::vector<SymbolEntry> entries);

// The symbol of a build_symbol_table() table whose range holds `vaddr`, or nullptr.
const Symbol* find_symbol(const std::vector<Symbol>& symbols, uint64_t vaddr);

}  // namespace bpfprof
