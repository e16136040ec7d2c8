#include "symbols/dwarf/debug_frame_file.h"

#include <elfutils/libdwelf.h>
#include <gelf.h>

#include <cstdlib>
#include <optional>
#include <string_view>

#include "symbols/dwarf/dwarf_module.h"

namespace bpfprof {
namespace {

// The .debug_frame section with bytes in the file (compressed or not), or nullptr.
Elf_Scn* debug_frame_section(Elf* elf) {
  size_t names = 0;
  if (elf_getshdrstrndx(elf, &names) != 0) return nullptr;
  for (Elf_Scn* section = elf_nextscn(elf, nullptr); section != nullptr;
       section = elf_nextscn(elf, section)) {
    GElf_Shdr header;
    if (gelf_getshdr(section, &header) == nullptr || header.sh_type != SHT_PROGBITS) continue;
    const char* name = elf_strptr(elf, names, header.sh_name);
    if (name != nullptr && std::string_view(name) == ".debug_frame") return section;
  }
  return nullptr;
}

// The first loadable segment's address: a separate debug file keeps its file's program headers.
std::optional<uint64_t> first_load_vaddr(Elf* elf) {
  size_t count = 0;
  if (elf_getphdrnum(elf, &count) != 0) return std::nullopt;
  for (size_t i = 0; i < count; ++i) {
    GElf_Phdr header;
    if (gelf_getphdr(elf, static_cast<int>(i), &header) != nullptr && header.p_type == PT_LOAD)
      return header.p_vaddr;
  }
  return std::nullopt;
}

}  // namespace

DebugFrameFile DebugFrameFile::find(Dwfl_Module* module, Elf* main, const std::string& path,
                                    const std::vector<std::string>& symbol_dirs) {
  DebugFrameFile file;
  if (main == nullptr) return file;
  if (debug_frame_section(main) != nullptr) {
    file.elf_ = main;
    return file;
  }
  GElf_Word crc = 0;
  const char* debuglink = dwelf_elf_gnu_debuglink(main, &crc);
  char* name = nullptr;
  file.fd_ = UniqueFd(find_debug_file(module, symbol_dirs, path.c_str(), debuglink, crc, &name));
  free(name);
  if (!file.fd_) return file;
  // Private: decompressing the section writes its new bytes over the mapping's.
  file.owned_.reset(elf_begin(file.fd_.get(), ELF_C_READ_MMAP_PRIVATE, nullptr));
  if (!file.owned_ || elf_kind(file.owned_.get()) != ELF_K_ELF) return file;
  Elf_Scn* section = debug_frame_section(file.owned_.get());
  GElf_Shdr header;
  if (section == nullptr || gelf_getshdr(section, &header) == nullptr) return file;
  if ((header.sh_flags & SHF_COMPRESSED) != 0 && elf_compress(section, 0, 0) < 0) return file;
  const std::optional<uint64_t> debug_vaddr = first_load_vaddr(file.owned_.get());
  const std::optional<uint64_t> main_vaddr = first_load_vaddr(main);
  if (debug_vaddr && main_vaddr) file.cfi_minus_vaddr_ = *debug_vaddr - *main_vaddr;
  file.elf_ = file.owned_.get();
  return file;
}

}  // namespace bpfprof
