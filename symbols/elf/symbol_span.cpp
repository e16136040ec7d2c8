#include "symbols/elf/symbol_span.h"

#include <elf.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <vector>

namespace bpfprof {
namespace {

constexpr size_t kChunkBytes = 1 << 20;

bool read_at(int fd, uint64_t offset, void* out, size_t size) {
  return pread(fd, out, size, static_cast<off_t>(offset)) == static_cast<ssize_t>(size);
}

// The section headers of .symtab and of the string table it names.
struct SymbolSections {
  Elf64_Shdr symbols{};
  Elf64_Shdr strings{};
};

std::optional<SymbolSections> symbol_sections(int fd) {
  Elf64_Ehdr header{};
  if (!read_at(fd, 0, &header, sizeof(header)) || std::memcmp(header.e_ident, ELFMAG, SELFMAG) ||
      header.e_ident[EI_CLASS] != ELFCLASS64 || header.e_ident[EI_DATA] != ELFDATA2LSB ||
      header.e_shentsize != sizeof(Elf64_Shdr))
    return std::nullopt;
  std::vector<Elf64_Shdr> sections(header.e_shnum);
  if (sections.empty() ||
      !read_at(fd, header.e_shoff, sections.data(), sections.size() * sizeof(Elf64_Shdr)))
    return std::nullopt;
  for (const Elf64_Shdr& s : sections)
    if (s.sh_type == SHT_SYMTAB && s.sh_entsize == sizeof(Elf64_Sym) &&
        s.sh_link < sections.size() && sections[s.sh_link].sh_type == SHT_STRTAB)
      return SymbolSections{s, sections[s.sh_link]};
  return std::nullopt;
}

// The offsets in the string table at which `prefix` begins (a name, or the tail of one that
// another name shares), sorted.
std::vector<uint32_t> prefix_offsets(int fd, const Elf64_Shdr& strings, std::string_view prefix) {
  std::vector<uint32_t> found;
  std::vector<char> chunk(kChunkBytes + prefix.size());
  // Each chunk after the first begins with the previous one's last prefix.size() - 1 bytes:
  // a prefix across two chunks is whole in the second.
  const size_t overlap = prefix.size() - 1;
  for (uint64_t at = 0; at < strings.sh_size && at <= UINT32_MAX; at += kChunkBytes) {
    const uint64_t from = at >= overlap ? at - overlap : 0;
    const size_t size = std::min<uint64_t>(strings.sh_size - from, at - from + kChunkBytes);
    if (!read_at(fd, strings.sh_offset + from, chunk.data(), size)) return {};
    const std::string_view bytes(chunk.data(), size);
    for (size_t i = bytes.find(prefix); i != std::string_view::npos; i = bytes.find(prefix, i + 1))
      found.push_back(static_cast<uint32_t>(from + i));  // one in the overlap: found twice
  }
  std::sort(found.begin(), found.end());
  found.erase(std::unique(found.begin(), found.end()), found.end());
  return found;
}

}  // namespace

std::optional<SymbolSpan> function_symbols_span(int fd, std::string_view prefix) {
  const std::optional<SymbolSections> sections = symbol_sections(fd);
  if (prefix.empty() || !sections) return std::nullopt;
  const std::vector<uint32_t> names = prefix_offsets(fd, sections->strings, prefix);
  if (names.empty()) return std::nullopt;
  std::optional<SymbolSpan> span;
  std::vector<Elf64_Sym> chunk(kChunkBytes / sizeof(Elf64_Sym));
  const uint64_t count = sections->symbols.sh_size / sizeof(Elf64_Sym);
  for (uint64_t first = 0; first < count; first += chunk.size()) {
    const size_t n = std::min<uint64_t>(chunk.size(), count - first);
    if (!read_at(fd, sections->symbols.sh_offset + first * sizeof(Elf64_Sym), chunk.data(),
                 n * sizeof(Elf64_Sym)))
      return std::nullopt;
    for (size_t i = 0; i < n; ++i) {
      const Elf64_Sym& s = chunk[i];
      if (ELF64_ST_TYPE(s.st_info) != STT_FUNC || s.st_shndx == SHN_UNDEF || s.st_value == 0 ||
          s.st_value + s.st_size < s.st_value ||
          !std::binary_search(names.begin(), names.end(), s.st_name))
        continue;
      if (!span) span = SymbolSpan{s.st_value, s.st_value + s.st_size};
      span->start = std::min(span->start, s.st_value);
      span->end = std::max(span->end, s.st_value + s.st_size);
    }
  }
  return span;
}

}  // namespace bpfprof
