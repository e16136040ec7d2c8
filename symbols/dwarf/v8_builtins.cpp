#include "symbols/dwarf/v8_builtins.h"

#include <array>

#include <algorithm>
#include <cstring>
#include <string_view>

#include "symbols/elf/elf_file.h"

namespace bpfprof {
namespace {

constexpr const char* kCodeSymbol = "v8_Default_embedded_blob_code_";
constexpr const char* kSizeSymbol = "v8_Default_embedded_blob_code_size_";
// Before V8 10.something (node 18) kCodeSymbol was a pointer in .data to the code, this one.
constexpr const char* kOlderCodeSymbol = "v8_Default_embedded_blob_code_data_";

// The two symbols' values from one symbol table section (the code's, the older name's when
// it is there); false if either is missing.
bool find_blob_symbols(Elf* elf, Elf_Scn* scn, const GElf_Shdr& header, uint64_t& code,
                       uint64_t& size_at) {
  Elf_Data* data = elf_getdata(scn, nullptr);
  if (data == nullptr || header.sh_entsize == 0) return false;
  const size_t count = header.sh_size / header.sh_entsize;
  bool have_code = false;
  bool have_size = false;
  bool have_older_code = false;
  for (size_t i = 0; i < count && !(have_older_code && have_size); ++i) {
    GElf_Sym symbol;
    if (gelf_getsym(data, static_cast<int>(i), &symbol) == nullptr || symbol.st_shndx == SHN_UNDEF)
      continue;
    const char* name = elf_strptr(elf, header.sh_link, symbol.st_name);
    // Most names differ at their first byte: strcmp only for those that start alike.
    if (name == nullptr || name[0] != 'v' || name[1] != '8') continue;
    if (strcmp(name, kCodeSymbol) == 0 && !have_older_code) {
      code = symbol.st_value;
      have_code = true;
    } else if (strcmp(name, kOlderCodeSymbol) == 0) {
      code = symbol.st_value;
      have_code = have_older_code = true;
    } else if (strcmp(name, kSizeSymbol) == 0) {
      size_at = symbol.st_value;
      have_size = true;
    }
  }
  return have_code && have_size;
}

// The section (with its bytes in the file) that holds `vaddr`, or nullptr.
Elf_Scn* section_at(Elf* elf, uint64_t vaddr, GElf_Shdr& header) {
  for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn != nullptr; scn = elf_nextscn(elf, scn)) {
    if (gelf_getshdr(scn, &header) == nullptr || header.sh_type == SHT_NOBITS) continue;
    if ((header.sh_flags & SHF_ALLOC) && vaddr >= header.sh_addr &&
        vaddr - header.sh_addr < header.sh_size)
      return scn;
  }
  return nullptr;
}

// The little-endian 32-bit value at `vaddr` in the file, if a section holds all four bytes.
std::optional<uint32_t> read_u32(Elf* elf, uint64_t vaddr) {
  GElf_Shdr header;
  Elf_Scn* scn = section_at(elf, vaddr, header);
  if (scn == nullptr || header.sh_size - (vaddr - header.sh_addr) < 4) return std::nullopt;
  Elf_Data* data = elf_getdata(scn, nullptr);
  const uint64_t offset = vaddr - header.sh_addr;
  if (data == nullptr || data->d_buf == nullptr || data->d_size < offset + 4) return std::nullopt;
  const auto* bytes = static_cast<const uint8_t*>(data->d_buf) + offset;
  return uint32_t{bytes[0]} | uint32_t{bytes[1]} << 8 | uint32_t{bytes[2]} << 16 |
         uint32_t{bytes[3]} << 24;
}

}  // namespace

std::optional<V8EmbeddedCode> find_v8_embedded_code(Elf* elf) {
  uint64_t code = 0;
  uint64_t size_at = 0;
  bool found = false;
  for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn != nullptr && !found;
       scn = elf_nextscn(elf, scn)) {
    GElf_Shdr header;
    if (gelf_getshdr(scn, &header) == nullptr) continue;
    if (header.sh_type == SHT_SYMTAB || header.sh_type == SHT_DYNSYM)
      found = find_blob_symbols(elf, scn, header, code, size_at);
  }
  if (!found) return std::nullopt;
  const std::optional<uint32_t> size = read_u32(elf, size_at);
  GElf_Shdr text;
  if (!size || *size == 0 || section_at(elf, code, text) == nullptr ||
      !(text.sh_flags & SHF_EXECINSTR))
    return std::nullopt;
  const uint64_t section_end = text.sh_addr + text.sh_size;
  return V8EmbeddedCode{code, std::min<uint64_t>(code + *size, section_end)};
}

bool is_v8_binary(int fd) {
  static constexpr std::array<std::string_view, 3> kPrefixes{"Builtins_", "_ZN2v88internal",
                                                             "_ZNK2v88internal"};
  return any_symbol_starts_with(fd, kPrefixes);
}

}  // namespace bpfprof
