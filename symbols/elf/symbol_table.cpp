#include "symbols/elf/symbol_table.h"
#include "symbols/util/sorted_ranges.h"

#include <elf.h>
#include <libelf.h>

#include <algorithm>
#include <limits>
#include <string_view>
#include <tuple>

namespace bpfprof {
namespace {

int binding_rank(unsigned char binding) {
  switch (binding) {
    case STB_GLOBAL:
    case STB_GNU_UNIQUE:
      return 0;
    case STB_WEAK:
      return 1;
    default:
      return 2;  // STB_LOCAL
  }
}

size_t leading_underscores(std::string_view name) {
  const size_t count = name.find_first_not_of('_');
  return count == std::string_view::npos ? name.size() : count;
}

// Display name choice among aliases at one address: global over weak over local over made
// up, then the least "internal" looking name (fewest leading underscores, e.g. malloc over
// __libc_malloc), then shortest, then alphabetical so the result does not depend on table order.
bool is_better_name(const SymbolEntry& a, const SymbolEntry& b) {
  const auto key = [](const SymbolEntry& e) {
    return std::make_tuple(e.binding_rank, e.size == 0, leading_underscores(e.name), e.name.size(),
                           std::string_view(e.name));
  };
  return key(a) < key(b);
}

// Widens each size-0 symbol up to the next symbol, bounded by its section's end.
void widen_size_zero_symbols(std::vector<Symbol>& symbols,
                             const std::vector<uint64_t>& section_ends) {
  for (size_t i = 0; i < symbols.size(); ++i) {
    Symbol& symbol = symbols[i];
    if (symbol.size != 0) continue;
    uint64_t end = std::numeric_limits<uint64_t>::max();
    if (i + 1 < symbols.size()) end = symbols[i + 1].address;
    if (section_ends[i] > symbol.address) end = std::min(end, section_ends[i]);
    if (end == std::numeric_limits<uint64_t>::max()) continue;
    symbol.size = end - symbol.address;
    symbol.widened = true;
  }
}

}  // namespace

std::optional<SymbolEntry> code_symbol_entry(Elf* elf, const GElf_Sym& symbol, size_t section_index,
                                             std::string_view name) {
  if (symbol.st_value == 0 || symbol.st_shndx == SHN_UNDEF || name.empty()) {
    return std::nullopt;
  }
  GElf_Shdr section;
  const bool in_section = symbol.st_shndx < SHN_LORESERVE || symbol.st_shndx == SHN_XINDEX;
  Elf_Scn* scn = in_section ? elf_getscn(elf, section_index) : nullptr;  // not SHN_ABS, SHN_COMMON
  const bool has_section = scn != nullptr && gelf_getshdr(scn, &section) != nullptr;
  const bool executable =
      has_section && (section.sh_flags & SHF_ALLOC) != 0 && (section.sh_flags & SHF_EXECINSTR) != 0;

  const unsigned char type = GELF_ST_TYPE(symbol.st_info);
  const bool is_function = type == STT_FUNC || type == STT_GNU_IFUNC;
  // Untyped labels in code (hand-written assembly) still name code; mapping symbols ($x,
  // $d) and tool markers (.annobin_*) do not.
  const bool is_code_label = type == STT_NOTYPE && executable && name[0] != '$' && name[0] != '.';
  if (!is_function && !is_code_label) return std::nullopt;
  return SymbolEntry{symbol.st_value, symbol.st_size, std::string(name),
                     binding_rank(GELF_ST_BIND(symbol.st_info)),
                     has_section ? section.sh_addr + section.sh_size : 0};
}

std::vector<Symbol> build_symbol_table(std::vector<SymbolEntry> entries) {
  std::sort(entries.begin(), entries.end(), [](const SymbolEntry& a, const SymbolEntry& b) {
    if (a.address != b.address) return a.address < b.address;
    return is_better_name(a, b);
  });
  std::vector<Symbol> symbols;
  std::vector<uint64_t> section_ends;
  for (size_t first = 0; first < entries.size();) {
    size_t last = first;
    uint64_t largest_size = 0;
    uint64_t section_end = 0;
    while (last < entries.size() && entries[last].address == entries[first].address) {
      largest_size = std::max(largest_size, entries[last].size);
      section_end = std::max(section_end, entries[last].section_end);
      ++last;
    }
    // The best name sorts first within the group; the group's size is the largest alias's.
    symbols.push_back({entries[first].address, largest_size, std::move(entries[first].name)});
    section_ends.push_back(section_end);
    first = last;
  }
  widen_size_zero_symbols(symbols, section_ends);
  return symbols;
}

const Symbol* find_symbol(const std::vector<Symbol>& symbols, uint64_t vaddr) {
  const Symbol* candidate = last_starting_at_or_below(symbols, vaddr, &Symbol::address);
  if (!candidate) return nullptr;
  // A size-0 symbol with nothing after it still names its own first byte.
  const uint64_t extent = std::max<uint64_t>(candidate->size, 1);
  return vaddr - candidate->address < extent ? candidate : nullptr;
}

}  // namespace bpfprof
