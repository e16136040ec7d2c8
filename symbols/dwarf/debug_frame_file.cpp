#include "symbols/dwarf/debug_frame_file.h"

#include <elfutils/libdwelf.h>
#include <gelf.h>

#include <cstdlib>
#include <optional>

#include "symbols/dwarf/cfi_functions.h"
#include "symbols/dwarf/dwarf_module.h"

namespace bpfprof {
namespace {

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
  if (cfi_section(main, CfiSection::kDebugFrame) != nullptr) {
    file.elf_ = main;
    return file;
  }
  GElf_Word crc = 0;
  const char* debuglink = dwelf_elf_gnu_debuglink(main, &crc);
  char* name = nullptr;
  UniqueFd fd(find_debug_file(module, symbol_dirs, path.c_str(), debuglink, crc, &name));
  free(name);
  if (!fd) return file;
  // Private: decompressing the section writes its new bytes over the mapping's.
  std::unique_ptr<Elf, decltype(&elf_end)> debug(
      elf_begin(fd.get(), ELF_C_READ_MMAP_PRIVATE, nullptr), &elf_end);
  if (!debug || elf_kind(debug.get()) != ELF_K_ELF) return file;
  Elf_Scn* section = cfi_section(debug.get(), CfiSection::kDebugFrame);
  GElf_Shdr header;
  if (section == nullptr || gelf_getshdr(section, &header) == nullptr) return file;
  if ((header.sh_flags & SHF_COMPRESSED) != 0 && elf_compress(section, 0, 0) < 0) return file;
  const std::optional<uint64_t> debug_vaddr = first_load_vaddr(debug.get());
  const std::optional<uint64_t> main_vaddr = first_load_vaddr(main);
  if (debug_vaddr && main_vaddr) file.cfi_minus_vaddr_ = *debug_vaddr - *main_vaddr;
  // Kept open only when it holds the section.
  file.fd_ = std::move(fd);
  file.owned_ = std::move(debug);
  file.elf_ = file.owned_.get();
  return file;
}

}  // namespace bpfprof
