// An ELF file's facts needed for profiling: build id, load segments (for turning file offsets
// into virtual addresses) and function symbols. Everything is read once in open(); the file
// descriptor and libelf handle are released before open() returns, so a cache can hold many
// ElfFiles without holding as many descriptors.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

struct Elf;  // libelf's

namespace bpfprof {

struct Symbol {
  uint64_t address = 0;  // virtual address (st_value) in the file's own address space
  uint64_t size = 0;     // sizes of 0 in the file are widened to reach the next symbol
  std::string name;      // mangled; demangling is the caller's job
  bool widened = false;  // size 0 in the file: `size` only reaches the next symbol
};

// A PT_LOAD program header.
struct LoadSegment {
  uint64_t file_offset = 0;  // p_offset
  uint64_t vaddr = 0;        // p_vaddr
  uint64_t file_size = 0;    // p_filesz
  uint64_t mem_size = 0;     // p_memsz
  uint32_t flags = 0;        // p_flags (PF_R | PF_W | PF_X)

  bool executable() const;
};

// What ElfFile::open reads: everything, or the headers, segments and notes alone (where a
// file's layout is all that is needed: its symbol table can be the larger part of the work,
// libLLVM's ~100k symbols).
enum class ElfContents : uint8_t { kAll, kLayout };

class ElfFile {
 public:
  // nullptr on failure, with a one-line reason in *error (if error is non-null).
  static std::unique_ptr<ElfFile> open(const std::string& path, std::string* error,
                                       ElfContents contents = ElfContents::kAll);

  const std::string& path() const { return path_; }

  // NT_GNU_BUILD_ID note contents; empty if the file has none.
  const std::vector<uint8_t>& build_id() const { return build_id_; }
  std::string build_id_hex() const;

  const std::vector<LoadSegment>& load_segments() const { return load_segments_; }
  // Where the byte at `file_offset` lands in the file's virtual address space.
  std::optional<uint64_t> file_offset_to_vaddr(uint64_t file_offset) const;
  // The inverse of file_offset_to_vaddr.
  std::optional<uint64_t> vaddr_to_file_offset(uint64_t vaddr) const;
  // Lowest PT_LOAD p_vaddr rounded down to a 4 KiB page: 0 for PIE executables and shared
  // objects, typically 0x400000 for classic non-PIE x86_64 executables.
  uint64_t base_vaddr() const { return base_vaddr_; }

  bool is_elf_type_exec() const;
  bool is_elf_type_dyn() const;
  // "x86_64", "aarch64", ...; "unknown" for machines not listed.
  std::string_view architecture() const { return architecture_; }

  // Function symbols sorted by address, one per address: those of the symbol table, plus
  // name@plt for PLT slots and _start at the entry point when no symbol is there.
  const std::vector<Symbol>& symbols() const { return symbols_; }
  // The symbol whose [address, address + size) range holds `vaddr`, or nullptr.
  const Symbol* lookup(uint64_t vaddr) const;
  // Which table the symbols came from: "symtab", "dynsym" or "none".
  std::string_view symbol_source() const { return symbol_source_; }
  // A Go binary: a `.gopclntab` section or a Go build-id note. Its functions are named from
  // Go's own tables (symbols/go/pclntab.h), read only for such files.
  bool is_go() const { return is_go_; }

 private:
  friend class ElfReader;
  ElfFile() = default;

  std::string path_;
  std::vector<uint8_t> build_id_;
  std::vector<LoadSegment> load_segments_;
  uint64_t base_vaddr_ = 0;
  uint16_t elf_type_ = 0;
  std::string_view architecture_ = "unknown";
  std::vector<Symbol> symbols_;
  std::string_view symbol_source_ = "none";
  bool is_go_ = false;
};

// Just the GNU build-id of the ELF file open as `fd` (empty if none or not ELF), without
// reading its symbols.
std::vector<uint8_t> read_elf_build_id(int fd);

// Whether an ELF file libelf has open was built by Go (its .gopclntab section or Go's
// build-id note): what ElfFile::is_go says.
bool is_go_binary(Elf* elf);

// Up to `size` bytes of code at `vaddr` (the file's own address space) of the ELF file open
// as `fd`, from the executable section that holds `vaddr`, cut at its end; empty when no
// section with its contents in the file (not a separate debug file's) holds it.
std::vector<uint8_t> read_code_bytes(int fd, uint64_t vaddr, uint64_t size);
// The same from an ELF file libelf has open.
std::vector<uint8_t> read_code_bytes(Elf* elf, uint64_t vaddr, uint64_t size);

// A defined .dynsym entry of any type (code or data): what a tool needs to find an
// exported variable, such as an interpreter's runtime state, in a process.
struct DynamicSymbol {
  uint64_t address = 0;  // st_value: a virtual address in the file's own address space
  uint64_t size = 0;
  bool defined = true;  // false: the file uses it from a library (SHN_UNDEF)
};
// The dynamic symbols among `names` of the ELF file open as `fd`, defined or used; a name
// that is absent is left out. Empty if the file is not ELF or has no .dynsym.
// Whether a name in the string table of .symtab or .dynsym of the ELF file open as `fd`
// starts with one of `prefixes` (a name that only ends another is not seen): a search of the
// tables' bytes, without building a symbol table.
bool any_symbol_starts_with(int fd, std::span<const std::string_view> prefixes);

// `size` bytes of the ELF file open as `fd` (laid out as `elf` says) at virtual address
// `vaddr`: a runtime's initialized data or code read before the process runs it. False unless
// all of them are in the file.
bool read_file_at_vaddr(int fd, const ElfFile& elf, uint64_t vaddr, void* out, size_t size);

std::unordered_map<std::string, DynamicSymbol> read_dynamic_symbols(
    int fd, const std::vector<std::string>& names);

}  // namespace bpfprof
