#include "symbols/elf/symbol_span.h"

#include <elf.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "symbols/util/read_file.h"

namespace bpfprof {
namespace {

constexpr size_t kChunkBytes = 1 << 20;

// The section headers of .symtab and of the string table it names.
struct SymbolSections {
  Elf64_Shdr symbols{};
  Elf64_Shdr strings{};
};

std::optional<SymbolSections> symbol_sections(int fd) {
  Elf64_Ehdr header{};
  if (!pread_exact(fd, &header, sizeof(header), 0) ||
      std::memcmp(header.e_ident, ELFMAG, SELFMAG) || header.e_ident[EI_CLASS] != ELFCLASS64 ||
      header.e_ident[EI_DATA] != ELFDATA2LSB || header.e_shentsize != sizeof(Elf64_Shdr))
    return std::nullopt;
  std::vector<Elf64_Shdr> sections(header.e_shnum);
  if (sections.empty() ||
      !pread_exact(fd, sections.data(), sections.size() * sizeof(Elf64_Shdr), header.e_shoff))
    return std::nullopt;
  for (const Elf64_Shdr& s : sections)
    if (s.sh_type == SHT_SYMTAB && s.sh_entsize == sizeof(Elf64_Sym) &&
        s.sh_link < sections.size() && sections[s.sh_link].sh_type == SHT_STRTAB)
      return SymbolSections{s, sections[s.sh_link]};
  return std::nullopt;
}

// A name's offset in the string table (where it begins: a symbol's st_name) and its class.
struct ClassifiedName {
  uint32_t offset;
  int klass;
  bool operator<(const ClassifiedName& other) const { return offset < other.offset; }
};

// The names in the string table that begin with `prefix` (a symbol's, or the tail of one that
// another shares), classified, by offset. Each chunk is read with the kMaxClassifiedName bytes
// after it, where a name that begins in it ends.
std::vector<ClassifiedName> classified_names(int fd, const Elf64_Shdr& strings,
                                             std::string_view prefix,
                                             const std::function<int(std::string_view)>& classify) {
  std::vector<ClassifiedName> found;
  std::vector<char> chunk(kChunkBytes + kMaxClassifiedName + 1);
  for (uint64_t at = 0; at < strings.sh_size && at <= UINT32_MAX; at += kChunkBytes) {
    const size_t size = std::min<uint64_t>(strings.sh_size - at, chunk.size());
    if (!pread_exact(fd, chunk.data(), size, strings.sh_offset + at)) return {};
    const std::string_view bytes(chunk.data(), size);
    for (size_t i = bytes.find(prefix); i < kChunkBytes && i != std::string_view::npos;
         i = bytes.find(prefix, i + 1)) {
      const size_t end = bytes.find('\0', i);
      const bool whole = end != std::string_view::npos && end - i <= kMaxClassifiedName;
      const int klass = whole ? classify(bytes.substr(i, end - i)) : -1;
      if (klass >= 0) found.push_back({static_cast<uint32_t>(at + i), klass});
    }
  }
  std::sort(found.begin(), found.end());
  return found;
}

// Widens `span` to hold [start, end).
void widen(std::optional<SymbolSpan>& span, uint64_t start, uint64_t end) {
  if (!span) span = SymbolSpan{start, end};
  span->start = std::min(span->start, start);
  span->end = std::max(span->end, end);
}

}  // namespace

std::vector<std::optional<SymbolSpan>> function_symbol_spans(
    int fd, std::string_view prefix, size_t classes,
    const std::function<int(std::string_view)>& classify) {
  const std::optional<SymbolSections> sections = symbol_sections(fd);
  if (prefix.empty() || prefix.size() > kMaxClassifiedName || !sections) return {};
  const std::vector<ClassifiedName> names =
      classified_names(fd, sections->strings, prefix, classify);
  std::vector<std::optional<SymbolSpan>> spans(classes);
  std::vector<Elf64_Sym> chunk(kChunkBytes / sizeof(Elf64_Sym));
  const uint64_t count = sections->symbols.sh_size / sizeof(Elf64_Sym);
  for (uint64_t first = 0; first < count && !names.empty(); first += chunk.size()) {
    const size_t n = std::min<uint64_t>(chunk.size(), count - first);
    if (!pread_exact(fd, chunk.data(), n * sizeof(Elf64_Sym),
                     sections->symbols.sh_offset + first * sizeof(Elf64_Sym)))
      return {};
    for (size_t i = 0; i < n; ++i) {
      const Elf64_Sym& s = chunk[i];
      if (ELF64_ST_TYPE(s.st_info) != STT_FUNC || s.st_shndx == SHN_UNDEF || s.st_value == 0 ||
          s.st_value + s.st_size < s.st_value)
        continue;
      const auto name = std::lower_bound(names.begin(), names.end(), ClassifiedName{s.st_name, 0});
      if (name != names.end() && name->offset == s.st_name &&
          static_cast<size_t>(name->klass) < classes)
        widen(spans[name->klass], s.st_value, s.st_value + s.st_size);
    }
  }
  return spans;
}

}  // namespace bpfprof
