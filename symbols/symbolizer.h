// Turns (library file, offset) and kernel addresses into what the profile shows: the
// library-relative address, the function name and the symbol that contains it. Each ELF
// file is read once (ElfCache); /proc/kallsyms is read on first use.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "symbols/kallsyms.h"
#include "symbols/symbol_cache.h"

namespace bpfprof {

struct SymbolizedAddress {
  uint64_t relative_address = 0;     // relative to the library's load base
  std::optional<std::string> name;   // the function, when a symbol covers the address
  uint64_t symbol_relative_address = 0;
  uint64_t symbol_size = 0;
};

struct LibraryDescription {
  std::string name;        // base name
  std::string path;
  std::string debug_name;
  std::string debug_path;
  std::string code_id;     // GNU build-id, hex
  std::string breakpad_id; // GUID form of the build-id plus age 0
  std::string arch;
};

// The Breakpad id of a GNU build-id: the first 16 bytes read as a little-endian GUID.
std::string breakpad_id_from_build_id(const std::vector<uint8_t>& build_id);
std::string hex_string(const std::vector<uint8_t>& bytes);
// The kernel's own build-id from /sys/kernel/notes (empty if unavailable).
std::vector<uint8_t> kernel_build_id();

class Symbolizer {
 public:
  // `path` names the library in the profile, `readable_path` is where its file can be
  // read; `reported_build_id` is the one the kernel gave with the mapping (may be empty).
  LibraryDescription describe_library(const std::string& path, const std::string& readable_path,
                                      const std::string& reported_build_id);
  LibraryDescription describe_kernel();

  SymbolizedAddress symbolize_in_file(const std::string& path, uint64_t file_offset);
  SymbolizedAddress symbolize_kernel(uint64_t address);
  bool kernel_addresses_hidden();

 private:
  const KernelSymbols* kernel_symbols();
  // The file whose symbol table names `binary`'s code: its separate debug file (found by
  // build-id) when the binary itself has no .symtab, else the binary.
  const ElfFile& symbol_source_for(const std::shared_ptr<const ElfFile>& binary);

  ElfCache elf_cache_;
  std::unordered_map<const ElfFile*, std::shared_ptr<const ElfFile>> symbol_sources_;
  std::optional<KernelSymbols> kernel_symbols_;
  bool kernel_symbols_loaded_ = false;
};

}  // namespace bpfprof
