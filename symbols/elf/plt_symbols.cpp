#include "symbols/elf/plt_symbols.h"

#include <elf.h>
#include <libelf.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

namespace bpfprof {
namespace {

constexpr uint64_t kDefaultSlotSize = 16;

// Adds, for each relocation of `section` that binds a GOT entry to a function, entry -> name.
void add_got_slot_names(Elf* elf, Elf_Scn* section, const GElf_Shdr& header,
                        std::unordered_map<uint64_t, std::string>& names) {
  Elf_Data* data = elf_getdata(section, nullptr);
  Elf_Scn* symbol_section = elf_getscn(elf, header.sh_link);
  GElf_Shdr symbol_header;
  if (data == nullptr || symbol_section == nullptr ||
      gelf_getshdr(symbol_section, &symbol_header) == nullptr)
    return;
  Elf_Data* symbols = elf_getdata(symbol_section, nullptr);
  const size_t entry_size = gelf_fsize(elf, ELF_T_RELA, 1, EV_CURRENT);
  if (symbols == nullptr || entry_size == 0) return;
  for (size_t i = 0; i < data->d_size / entry_size; ++i) {
    GElf_Rela relocation;
    GElf_Sym symbol;
    if (gelf_getrela(data, static_cast<int>(i), &relocation) == nullptr) continue;
    const auto type = GELF_R_TYPE(relocation.r_info);
    // JUMP_SLOT: .plt/.plt.sec slots (.rela.plt); GLOB_DAT: .plt.got slots (.rela.dyn).
    if (type != R_X86_64_JUMP_SLOT && type != R_X86_64_GLOB_DAT) continue;
    if (gelf_getsym(symbols, static_cast<int>(GELF_R_SYM(relocation.r_info)), &symbol) == nullptr)
      continue;
    const char* name = elf_strptr(elf, symbol_header.sh_link, symbol.st_name);
    if (name != nullptr && name[0] != '\0') names.emplace(relocation.r_offset, name);
  }
}

// GOT entry address -> the function a relocation binds it to.
std::unordered_map<uint64_t, std::string> got_slot_names(Elf* elf) {
  std::unordered_map<uint64_t, std::string> names;
  for (Elf_Scn* section = elf_nextscn(elf, nullptr); section != nullptr;
       section = elf_nextscn(elf, section)) {
    GElf_Shdr header;
    if (gelf_getshdr(section, &header) != nullptr && header.sh_type == SHT_RELA) {
      add_got_slot_names(elf, section, header, names);
    }
  }
  return names;
}

// The GOT entry a slot's `jmp *disp(%rip)` (ff 25) reads, at the slot's start or after a
// bnd prefix and/or an endbr64 (the .plt.sec form).
std::optional<uint64_t> jump_slot_target(const uint8_t* slot, uint64_t size,
                                         uint64_t slot_address) {
  for (uint64_t at : {0, 1, 4, 5}) {
    if (at + 6 > size || slot[at] != 0xff || slot[at + 1] != 0x25) continue;
    int32_t displacement;
    std::memcpy(&displacement, slot + at + 2, sizeof displacement);
    return slot_address + at + 6 + static_cast<uint64_t>(static_cast<int64_t>(displacement));
  }
  return std::nullopt;
}

bool is_plt_section(const char* name) {
  const std::string_view view = name != nullptr ? name : "";
  return view == ".plt" || view == ".plt.sec" || view == ".plt.got";
}

void add_slots(Elf_Data* code, const GElf_Shdr& header,
               const std::unordered_map<uint64_t, std::string>& got_names,
               std::vector<SymbolEntry>& entries) {
  const auto* bytes = static_cast<const uint8_t*>(code->d_buf);
  const uint64_t slot_size = header.sh_entsize != 0 ? header.sh_entsize : kDefaultSlotSize;
  const uint64_t size = std::min<uint64_t>(code->d_size, header.sh_size);
  for (uint64_t offset = 0; offset + slot_size <= size; offset += slot_size) {
    const uint64_t address = header.sh_addr + offset;
    const std::optional<uint64_t> target = jump_slot_target(bytes + offset, slot_size, address);
    const auto name = target ? got_names.find(*target) : got_names.end();
    if (name == got_names.end()) continue;  // PLT0, lazy-binding stubs
    entries.push_back({address, slot_size, name->second + "@plt", kSyntheticBindingRank,
                       header.sh_addr + header.sh_size});
  }
}

}  // namespace

std::vector<SymbolEntry> plt_symbol_entries(Elf* elf, uint16_t machine) {
  std::vector<SymbolEntry> entries;
  size_t section_names = 0;
  if (machine != EM_X86_64 || elf_getshdrstrndx(elf, &section_names) != 0) return entries;
  std::optional<std::unordered_map<uint64_t, std::string>> got_names;  // read once a PLT is found
  for (Elf_Scn* section = elf_nextscn(elf, nullptr); section != nullptr;
       section = elf_nextscn(elf, section)) {
    GElf_Shdr header;
    if (gelf_getshdr(section, &header) == nullptr || header.sh_type != SHT_PROGBITS ||
        (header.sh_flags & SHF_EXECINSTR) == 0 ||
        !is_plt_section(elf_strptr(elf, section_names, header.sh_name))) {
      continue;
    }
    Elf_Data* code = elf_getdata(section, nullptr);
    if (code == nullptr || code->d_buf == nullptr) continue;
    if (!got_names) got_names = got_slot_names(elf);
    add_slots(code, header, *got_names, entries);
  }
  return entries;
}

}  // namespace bpfprof
