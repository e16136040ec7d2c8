// Each symbol of an ELF file's tables of one type, as libelf reads them one by one: what the
// project's own symbol readers are checked against.
#pragma once

#include <gelf.h>
#include <libelf.h>

#include <cstdint>
#include <memory>

namespace bpfprof::testing_helpers {

// Calls visit(name, symbol) for each named entry of the tables of `type` (SHT_SYMTAB,
// SHT_DYNSYM) of the ELF file open as `fd`.
template <typename Visit>
void libelf_symbols(int fd, uint32_t type, Visit visit) {
  elf_version(EV_CURRENT);
  const std::unique_ptr<Elf, decltype(&elf_end)> owned(elf_begin(fd, ELF_C_READ, nullptr), elf_end);
  Elf* elf = owned.get();
  for (Elf_Scn* section = elf ? elf_nextscn(elf, nullptr) : nullptr; section;
       section = elf_nextscn(elf, section)) {
    GElf_Shdr header;
    if (!gelf_getshdr(section, &header) || header.sh_type != type || !header.sh_entsize) continue;
    Elf_Data* data = elf_getdata(section, nullptr);
    for (size_t i = 1; i < header.sh_size / header.sh_entsize; ++i) {
      GElf_Sym s;
      const char* name = gelf_getsym(data, static_cast<int>(i), &s)
                             ? elf_strptr(elf, header.sh_link, s.st_name)
                             : nullptr;
      if (name) visit(name, s);
    }
  }
}

}  // namespace bpfprof::testing_helpers
