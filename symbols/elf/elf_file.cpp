#include "symbols/elf/elf_file.h"

#include <elf.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <iterator>
#include <limits>
#include <string_view>
#include <tuple>
#include <unordered_set>
#include <vector>

#include "symbols/elf/plt_symbols.h"
#include "symbols/elf/symbol_table.h"
#include "symbols/util/read_file.h"
#include "symbols/util/text.h"
#include "symbols/util/unique_handle.h"
#include "symbols/util/untrusted_file.h"

namespace bpfprof {
namespace {

struct ElfCloser {
  void operator()(Elf* elf) const noexcept { elf_end(elf); }
};
using UniqueElf = UniqueHandle<Elf*, ElfCloser, nullptr>;

constexpr uint64_t kBasePageSize = 4096;

uint64_t round_down(uint64_t value, uint64_t alignment) { return value & ~(alignment - 1); }

// Mappings start on a page boundary below p_offset, so addresses in that page prefix (and
// after p_filesz up to the page end) are still backed by the segment's mapping.
uint64_t mapping_page_size() {
  static const uint64_t page_size = [] {
    const long size = sysconf(_SC_PAGESIZE);
    return size > 0 ? std::max<uint64_t>(static_cast<uint64_t>(size), kBasePageSize)
                    : kBasePageSize;
  }();
  return page_size;
}

bool libelf_ready() {
  static const bool ready = elf_version(EV_CURRENT) != EV_NONE;
  return ready;
}

std::string libelf_error() {
  const char* message = elf_errmsg(0);
  return message ? message : "unknown libelf error";
}

std::string_view architecture_name(const GElf_Ehdr& header) {
  const bool is_64bit = header.e_ident[EI_CLASS] == ELFCLASS64;
  const bool is_little_endian = header.e_ident[EI_DATA] == ELFDATA2LSB;
  switch (header.e_machine) {
    case EM_X86_64:
      return "x86_64";
    case EM_386:
      return "x86";
    case EM_AARCH64:
      return "aarch64";
    case EM_ARM:
      return "arm";
    case EM_RISCV:
      return is_64bit ? "riscv64" : "riscv32";
    case EM_PPC64:
      return is_little_endian ? "ppc64le" : "ppc64";
    case EM_PPC:
      return "ppc";
    case EM_S390:
      return is_64bit ? "s390x" : "s390";
    case EM_MIPS:
      return is_64bit ? "mips64" : "mips";
    default:
      return "unknown";
  }
}

std::vector<uint8_t> find_build_id_in_notes(const Elf_Data* data) {
  if (data == nullptr || data->d_buf == nullptr) return {};
  const auto* bytes = static_cast<const uint8_t*>(data->d_buf);
  size_t offset = 0;
  GElf_Nhdr note;
  size_t name_offset = 0;
  size_t desc_offset = 0;
  while ((offset = gelf_getnote(const_cast<Elf_Data*>(data), offset, &note, &name_offset,
                                &desc_offset)) != 0) {
    const bool is_gnu_note = note.n_namesz == sizeof(ELF_NOTE_GNU) &&
                             name_offset + note.n_namesz <= data->d_size &&
                             std::memcmp(bytes + name_offset, ELF_NOTE_GNU, note.n_namesz) == 0;
    if (is_gnu_note && note.n_type == NT_GNU_BUILD_ID && note.n_descsz > 0 &&
        desc_offset + note.n_descsz <= data->d_size) {
      return {bytes + desc_offset, bytes + desc_offset + note.n_descsz};
    }
  }
  return {};
}

// Prefer program headers (what the loader sees, present even when sections are stripped),
// then SHT_NOTE sections (e.g. separate debug files).
std::vector<uint8_t> read_build_id(Elf* elf, const std::vector<GElf_Phdr>& note_segments) {
  for (const GElf_Phdr& segment : note_segments) {
    const Elf_Type note_type = segment.p_align == 8 ? ELF_T_NHDR8 : ELF_T_NHDR;
    Elf_Data* data = elf_getdata_rawchunk(elf, static_cast<int64_t>(segment.p_offset),
                                          segment.p_filesz, note_type);
    if (auto id = find_build_id_in_notes(data); !id.empty()) return id;
  }
  for (Elf_Scn* section = elf_nextscn(elf, nullptr); section != nullptr;
       section = elf_nextscn(elf, section)) {
    GElf_Shdr header;
    if (gelf_getshdr(section, &header) == nullptr || header.sh_type != SHT_NOTE) continue;
    if (auto id = find_build_id_in_notes(elf_getdata(section, nullptr)); !id.empty()) return id;
  }
  return {};
}

Elf_Scn* find_section(Elf* elf, uint32_t type) {
  for (Elf_Scn* section = elf_nextscn(elf, nullptr); section != nullptr;
       section = elf_nextscn(elf, section)) {
    GElf_Shdr header;
    if (gelf_getshdr(section, &header) != nullptr && header.sh_type == type) return section;
  }
  return nullptr;
}

// The SHT_SYMTAB_SHNDX section belonging to `symbol_table`, for files with >65280 sections.
Elf_Data* find_extended_index_data(Elf* elf, Elf_Scn* symbol_table) {
  const size_t table_index = elf_ndxscn(symbol_table);
  for (Elf_Scn* section = elf_nextscn(elf, nullptr); section != nullptr;
       section = elf_nextscn(elf, section)) {
    GElf_Shdr header;
    if (gelf_getshdr(section, &header) != nullptr && header.sh_type == SHT_SYMTAB_SHNDX &&
        header.sh_link == table_index) {
      return elf_getdata(section, nullptr);
    }
  }
  return nullptr;
}

std::vector<SymbolEntry> read_function_symbols(Elf* elf, Elf_Scn* symbol_table) {
  std::vector<SymbolEntry> entries;
  GElf_Shdr table_header;
  if (gelf_getshdr(symbol_table, &table_header) == nullptr) return entries;
  Elf_Data* data = elf_getdata(symbol_table, nullptr);
  const size_t entry_size = gelf_fsize(elf, ELF_T_SYM, 1, EV_CURRENT);
  if (data == nullptr || entry_size == 0) return entries;
  Elf_Data* extended_index_data = find_extended_index_data(elf, symbol_table);

  // Names may take four times the string table (real files: about once; aliases share one).
  GElf_Shdr strings_header;
  Elf_Scn* strings = elf_getscn(elf, table_header.sh_link);
  SymbolNameBudget names((strings && gelf_getshdr(strings, &strings_header) != nullptr)
                             ? 4 * strings_header.sh_size + SymbolNameBudget::kMaxNameBytes
                             : 0);
  const size_t count = data->d_size / entry_size;
  for (size_t i = 1; i < count; ++i) {  // entry 0 is the reserved null symbol
    GElf_Sym symbol;
    Elf32_Word extended_index = 0;
    if (gelf_getsymshndx(data, extended_index_data, static_cast<int>(i), &symbol,
                         &extended_index) == nullptr) {
      continue;
    }
    const size_t section_index = symbol.st_shndx == SHN_XINDEX ? extended_index : symbol.st_shndx;
    const std::optional<std::string_view> name =
        names.take(elf_strptr(elf, table_header.sh_link, symbol.st_name));
    if (!name) break;
    if (auto entry = code_symbol_entry(elf, symbol, section_index, *name))
      entries.push_back(std::move(*entry));
  }
  return entries;
}

// The end (sh_addr + sh_size) of the allocated section holding `vaddr`; 0 if none does.
uint64_t section_end_at(Elf* elf, uint64_t vaddr) {
  for (Elf_Scn* section = elf_nextscn(elf, nullptr); section != nullptr;
       section = elf_nextscn(elf, section)) {
    GElf_Shdr header;
    if (gelf_getshdr(section, &header) == nullptr || (header.sh_flags & SHF_ALLOC) == 0) continue;
    if (vaddr >= header.sh_addr && vaddr - header.sh_addr < header.sh_size)
      return header.sh_addr + header.sh_size;
  }
  return 0;
}

// The Go linker's marks: its pclntab section, or its build-id note (owner "Go", type 4), which
// is there when the section headers are not.
bool looks_like_go(Elf* elf, const std::vector<GElf_Phdr>& note_segments) {
  size_t names = 0;
  if (elf_getshdrstrndx(elf, &names) == 0) {
    for (Elf_Scn* section = elf_nextscn(elf, nullptr); section != nullptr;
         section = elf_nextscn(elf, section)) {
      GElf_Shdr header;
      const char* name =
          gelf_getshdr(section, &header) ? elf_strptr(elf, names, header.sh_name) : nullptr;
      if (name && (strcmp(name, ".gopclntab") == 0 || strcmp(name, ".data.rel.ro.gopclntab") == 0))
        return true;
    }
  }
  constexpr uint32_t kGoBuildIdNote = 4;
  for (const GElf_Phdr& segment : note_segments) {
    Elf_Data* data = elf_getdata_rawchunk(elf, static_cast<int64_t>(segment.p_offset),
                                          segment.p_filesz, ELF_T_NHDR);
    if (data == nullptr || data->d_buf == nullptr) continue;
    const auto* bytes = static_cast<const char*>(data->d_buf);
    size_t offset = 0, name_offset = 0, desc_offset = 0;
    GElf_Nhdr note;
    while ((offset = gelf_getnote(data, offset, &note, &name_offset, &desc_offset)) != 0) {
      if (note.n_type == kGoBuildIdNote && note.n_namesz == 3 && name_offset + 3 <= data->d_size &&
          memcmp(bytes + name_offset, "Go", 3) == 0)
        return true;
    }
  }
  return false;
}

// Stripped executables rarely export _start, and without a name of its own the entry point
// would take the name of whatever symbol precedes it (gcc's driver: strcmp).
void add_entry_point(Elf* elf, uint64_t entry, std::vector<SymbolEntry>& entries) {
  if (entry == 0) return;
  for (const SymbolEntry& e : entries) {
    if (e.address == entry) return;
  }
  entries.push_back({entry, 0, "_start", kSyntheticBindingRank, section_end_at(elf, entry)});
}

}  // namespace

bool is_go_binary(Elf* elf) {
  size_t count = 0;
  if (elf_getphdrnum(elf, &count) != 0) count = 0;
  std::vector<GElf_Phdr> notes;
  for (size_t i = 0; i < count; ++i) {
    GElf_Phdr segment;
    if (gelf_getphdr(elf, static_cast<int>(i), &segment) && segment.p_type == PT_NOTE)
      notes.push_back(segment);
  }
  return looks_like_go(elf, notes);
}

// Does the libelf work for ElfFile::open; a friend so it can fill the private fields.
class ElfReader {
 public:
  static std::unique_ptr<ElfFile> read(const std::string& path, std::string* error,
                                       ElfContents contents) {
    auto fail = [&](const std::string& reason) -> std::unique_ptr<ElfFile> {
      if (error != nullptr) *error = path + ": " + reason;
      return nullptr;
    };
    if (!libelf_ready()) return fail("libelf initialization failed");
    UntrustedOpen opened = open_untrusted(path, UntrustedKind::kBinary);
    if (opened.refusal) {
      if (error != nullptr) *error = opened.refusal->message;
      return nullptr;
    }
    if (!opened.fd) return fail(std::strerror(errno));
    UniqueFd fd = std::move(opened.fd);
    if (opened.size == 0) return fail("empty file");

    UniqueElf elf(elf_begin(fd.get(), ELF_C_READ_MMAP, nullptr));
    if (!elf) return fail("elf_begin: " + libelf_error());
    if (elf_kind(elf.get()) != ELF_K_ELF) return fail("not an ELF file");
    GElf_Ehdr header;
    if (gelf_getehdr(elf.get(), &header) == nullptr)
      return fail("bad ELF header: " + libelf_error());
    if (std::optional<std::string> problem = truncated_header_tables(header, opened.size))
      return fail(*problem);

    auto file = std::unique_ptr<ElfFile>(new ElfFile());
    file->path_ = path;
    file->elf_type_ = header.e_type;
    file->architecture_ = architecture_name(header);
    Segments segments;
    if (std::optional<std::string> problem = read_segments(elf.get(), *file, segments))
      return fail(*problem);
    if ((header.e_type == ET_EXEC || header.e_type == ET_DYN) && file->load_segments_.empty())
      return fail("no PT_LOAD segments");
    file->build_id_ = read_build_id(elf.get(), segments.notes);
    file->is_go_ = looks_like_go(elf.get(), segments.notes);
    if (contents == ElfContents::kAll)
      read_symbols(elf.get(), header, header.e_type == ET_EXEC || segments.has_interpreter, *file);
    return file;
  }

 private:
  // libelf silently clamps the program and section header counts to what fits in the file,
  // so a truncated file would look like one without them; say so instead.
  static std::optional<std::string> truncated_header_tables(const GElf_Ehdr& header,
                                                            uint64_t file_size) {
    const uint64_t program_table_size = uint64_t{header.e_phnum} * header.e_phentsize;
    if (header.e_phnum != PN_XNUM &&
        (header.e_phoff > file_size || file_size - header.e_phoff < program_table_size))
      return "truncated: program headers extend past the end of the file";
    // e_shnum == 0 means "none" or "count stored elsewhere".
    const uint64_t section_table_size = uint64_t{header.e_shnum} * header.e_shentsize;
    if (header.e_shnum != 0 &&
        (header.e_shoff > file_size || file_size - header.e_shoff < section_table_size))
      return "truncated: section headers extend past the end of the file";
    return std::nullopt;
  }

  struct Segments {
    std::vector<GElf_Phdr> notes;
    bool has_interpreter = false;  // PIE executables are ET_DYN, but have a PT_INTERP
  };

  // PT_LOAD segments into `file` (and its base address), the notes and PT_INTERP into
  // `segments`; the reason when the program headers cannot be read.
  static std::optional<std::string> read_segments(Elf* elf, ElfFile& file, Segments& segments) {
    size_t count = 0;
    if (elf_getphdrnum(elf, &count) != 0) return "bad program headers: " + libelf_error();
    for (size_t i = 0; i < count; ++i) {
      GElf_Phdr ph;
      if (gelf_getphdr(elf, static_cast<int>(i), &ph) == nullptr)
        return "bad program header: " + libelf_error();
      if (ph.p_type == PT_LOAD)
        file.load_segments_.push_back(
            {ph.p_offset, ph.p_vaddr, ph.p_filesz, ph.p_memsz, ph.p_flags});
      else if (ph.p_type == PT_NOTE)
        segments.notes.push_back(ph);
      else if (ph.p_type == PT_INTERP)
        segments.has_interpreter = true;
    }
    if (!file.load_segments_.empty()) {
      const auto lowest = std::min_element(
          file.load_segments_.begin(), file.load_segments_.end(),
          [](const LoadSegment& a, const LoadSegment& b) { return a.vaddr < b.vaddr; });
      file.base_vaddr_ = round_down(lowest->vaddr, kBasePageSize);
    }
    return std::nullopt;
  }

  // .symtab is the complete table; .dynsym (exported symbols only) is the fallback for
  // stripped files such as Debian's libc. Either way PLT slots and the entry point of an
  // executable get names of their own, as objdump gives them.
  static void read_symbols(Elf* elf, const GElf_Ehdr& header, bool is_executable, ElfFile& file) {
    std::vector<SymbolEntry> entries;
    for (const auto& [type, source] :
         {std::pair{SHT_SYMTAB, "symtab"}, std::pair{SHT_DYNSYM, "dynsym"}}) {
      if (Elf_Scn* table = find_section(elf, type)) entries = read_function_symbols(elf, table);
      if (!entries.empty()) {
        file.symbol_source_ = source;
        break;
      }
    }
    std::vector<SymbolEntry> plt = plt_symbol_entries(elf, header.e_machine);
    std::move(plt.begin(), plt.end(), std::back_inserter(entries));
    if (is_executable) add_entry_point(elf, header.e_entry, entries);
    file.symbols_ = build_symbol_table(std::move(entries));
  }
};

bool LoadSegment::executable() const { return (flags & PF_X) != 0; }

std::unique_ptr<ElfFile> ElfFile::open(const std::string& path, std::string* error,
                                       ElfContents contents) {
  return ElfReader::read(path, error, contents);
}

std::string ElfFile::build_id_hex() const { return hex_string(build_id_); }

bool ElfFile::is_elf_type_exec() const { return elf_type_ == ET_EXEC; }
bool ElfFile::is_elf_type_dyn() const { return elf_type_ == ET_DYN; }

std::optional<uint64_t> ElfFile::file_offset_to_vaddr(uint64_t file_offset) const {
  // Exact containment first: page-rounded ranges of neighbouring segments can overlap.
  for (const LoadSegment& segment : load_segments_) {
    if (file_offset >= segment.file_offset &&
        file_offset - segment.file_offset < segment.file_size) {
      return file_offset - segment.file_offset + segment.vaddr;
    }
  }
  const uint64_t page = mapping_page_size();
  for (const LoadSegment& segment : load_segments_) {
    const uint64_t mapped_begin = round_down(segment.file_offset, page);
    const uint64_t mapped_end =
        round_down(segment.file_offset + segment.file_size + page - 1, page);
    if (file_offset >= mapped_begin && file_offset < mapped_end) {
      return file_offset - segment.file_offset + segment.vaddr;  // wraps back correctly
    }
  }
  return std::nullopt;
}

std::optional<uint64_t> ElfFile::vaddr_to_file_offset(uint64_t vaddr) const {
  for (const LoadSegment& segment : load_segments_) {
    if (vaddr >= segment.vaddr && vaddr - segment.vaddr < segment.file_size) {
      return vaddr - segment.vaddr + segment.file_offset;
    }
  }
  const uint64_t page = mapping_page_size();
  for (const LoadSegment& segment : load_segments_) {
    const uint64_t mapped_begin = round_down(segment.vaddr, page);
    const uint64_t mapped_end = round_down(segment.vaddr + segment.file_size + page - 1, page);
    if (vaddr >= mapped_begin && vaddr < mapped_end &&
        vaddr - segment.vaddr + segment.file_offset >= round_down(segment.file_offset, page)) {
      return vaddr - segment.vaddr + segment.file_offset;
    }
  }
  return std::nullopt;
}

const Symbol* ElfFile::lookup(uint64_t vaddr) const { return find_symbol(symbols_, vaddr); }

// Small reads of a file that may change meanwhile (ELF_C_READ: pread, where a mapping
// would raise SIGBUS once the file is truncated under it).
std::vector<uint8_t> read_elf_build_id(int fd) {
  if (!libelf_ready()) return {};
  UniqueElf elf(elf_begin(fd, ELF_C_READ, nullptr));
  size_t count = 0;
  if (!elf || elf_kind(elf.get()) != ELF_K_ELF || elf_getphdrnum(elf.get(), &count) != 0) return {};
  std::vector<GElf_Phdr> note_segments;
  for (size_t i = 0; i < count; ++i) {
    GElf_Phdr header;
    if (gelf_getphdr(elf.get(), static_cast<int>(i), &header) && header.p_type == PT_NOTE)
      note_segments.push_back(header);
  }
  return read_build_id(elf.get(), note_segments);
}

bool any_symbol_starts_with(int fd, std::span<const std::string_view> prefixes) {
  if (!libelf_ready()) return false;
  UniqueElf elf(elf_begin(fd, ELF_C_READ_MMAP, nullptr));
  if (!elf || elf_kind(elf.get()) != ELF_K_ELF) return false;
  for (const uint32_t type : {SHT_SYMTAB, SHT_DYNSYM}) {
    Elf_Scn* table = find_section(elf.get(), type);
    GElf_Shdr table_header;
    if (!table || gelf_getshdr(table, &table_header) == nullptr) continue;
    Elf_Scn* strings_section = elf_getscn(elf.get(), table_header.sh_link);
    Elf_Data* strings = strings_section ? elf_getdata(strings_section, nullptr) : nullptr;
    if (strings == nullptr || strings->d_buf == nullptr) continue;
    // The names' bytes searched, not each symbol's name looked up (libLLVM's 60,000 symbols):
    // a name starts after a NUL, unless it is the tail of another that the linker shares.
    for (std::string_view prefix : prefixes) {
      const std::string needle = std::string(1, '\0').append(prefix);
      if (memmem(strings->d_buf, strings->d_size, needle.data(), needle.size()) != nullptr)
        return true;
    }
  }
  return false;
}

bool read_file_at_vaddr(int fd, const ElfFile& elf, uint64_t vaddr, void* out, size_t size) {
  const std::optional<uint64_t> offset = elf.vaddr_to_file_offset(vaddr);
  return offset && pread_exact(fd, out, size, *offset);
}

std::unordered_map<std::string, DynamicSymbol> read_dynamic_symbols(
    int fd, const std::vector<std::string>& names) {
  std::unordered_map<std::string, DynamicSymbol> found;
  if (!libelf_ready()) return found;
  UniqueElf elf(elf_begin(fd, ELF_C_READ, nullptr));
  if (!elf || elf_kind(elf.get()) != ELF_K_ELF) return found;
  Elf_Scn* table = find_section(elf.get(), SHT_DYNSYM);
  GElf_Shdr table_header;
  if (!table || gelf_getshdr(table, &table_header) == nullptr) return found;
  Elf_Data* data = elf_getdata(table, nullptr);
  const size_t entry_size = gelf_fsize(elf.get(), ELF_T_SYM, 1, EV_CURRENT);
  Elf_Scn* strings_section = elf_getscn(elf.get(), table_header.sh_link);
  Elf_Data* strings = strings_section ? elf_getdata(strings_section, nullptr) : nullptr;
  if (data == nullptr || entry_size == 0 || strings == nullptr || strings->d_buf == nullptr)
    return found;
  // node exports 75,000 symbols: most are told apart from the few wanted by their length,
  // without a lookup (elf_strptr and a std::string each took 22-40 ms there).
  const std::unordered_set<std::string_view> wanted(names.begin(), names.end());
  size_t longest = 0;
  for (const std::string& name : names) longest = std::max(longest, name.size());
  std::vector<bool> wanted_length(longest + 1, false);
  for (const std::string& name : names) wanted_length[name.size()] = true;
  const char* text = static_cast<const char*>(strings->d_buf);
  for (size_t i = 1; i < data->d_size / entry_size; ++i) {
    GElf_Sym symbol;
    if (gelf_getsym(data, static_cast<int>(i), &symbol) == nullptr ||
        symbol.st_name >= strings->d_size)
      continue;
    const size_t left = strings->d_size - symbol.st_name;
    const std::string_view name(text + symbol.st_name,
                                strnlen(text + symbol.st_name, std::min(left, longest + 1)));
    if (name.size() > longest || name.size() == left || !wanted_length[name.size()] ||
        !wanted.contains(name))
      continue;  // too long, not ended in the section, or not wanted
    found.emplace(name,
                  DynamicSymbol{symbol.st_value, symbol.st_size, symbol.st_shndx != SHN_UNDEF});
  }
  return found;
}

std::vector<uint8_t> read_code_bytes(int fd, uint64_t vaddr, uint64_t size) {
  if (!libelf_ready()) return {};
  UniqueElf elf(elf_begin(fd, ELF_C_READ_MMAP, nullptr));
  if (!elf || elf_kind(elf.get()) != ELF_K_ELF) return {};
  return read_code_bytes(elf.get(), vaddr, size);
}

std::vector<uint8_t> read_code_bytes(Elf* elf, uint64_t vaddr, uint64_t size) {
  std::vector<uint8_t> bytes;
  for (Elf_Scn* section = elf_nextscn(elf, nullptr); section != nullptr;
       section = elf_nextscn(elf, section)) {
    GElf_Shdr header;
    // A separate debug file keeps the headers of the code sections but not their bytes
    // (SHT_NOBITS): only a section with its contents in the file is read.
    if (gelf_getshdr(section, &header) == nullptr || header.sh_type != SHT_PROGBITS ||
        (header.sh_flags & SHF_EXECINSTR) == 0 || vaddr < header.sh_addr ||
        vaddr - header.sh_addr >= header.sh_size)
      continue;
    Elf_Data* data = elf_rawdata(section, nullptr);
    const uint64_t start = vaddr - header.sh_addr;
    if (data == nullptr || data->d_buf == nullptr || start >= data->d_size) return bytes;
    const uint64_t count = std::min<uint64_t>(size, data->d_size - start);
    const auto* begin = static_cast<const uint8_t*>(data->d_buf) + start;
    bytes.assign(begin, begin + count);
    return bytes;
  }
  return bytes;
}

}  // namespace bpfprof
