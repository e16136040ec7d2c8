// Turns (library file, offset) and kernel addresses into what the profile shows: the
// library-relative address, the function name and the symbol that contains it. Each ELF
// file is read once (ElfCache); /proc/kallsyms is read on first use.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "symbols/dwarf/dwarf_module.h"
#include "symbols/elf/symbol_cache.h"
#include "symbols/go/pclntab.h"
#include "symbols/jit/perf_map.h"
#include "symbols/kernel/kallsyms.h"
#include "symbols/util/text.h"

namespace bpfprof {

struct SymbolizerOptions {
  std::vector<std::string> symbol_dirs;  // --symbol-dir: more places for debug files
  std::string kallsyms_path = "/proc/kallsyms";
};

// The symbol (ELF symbol table) that contains an address.
struct NativeSymbolInfo {
  std::string name;  // demangled
  uint64_t relative_address = 0;
  uint64_t size = 0;
};

// One frame of what an address resolves to. An address where functions were inlined gives
// several, outermost first, all with the same relative address and symbol.
struct SymbolizedFrame {
  std::string name;               // demangled; empty when nothing names the address
  uint64_t relative_address = 0;  // relative to the library's load base
  std::optional<std::string> file;
  std::optional<uint32_t> line;
  uint32_t inline_depth = 0;
  std::optional<NativeSymbolInfo> symbol;
  // Named `fn_0xSTART` after the call-frame information's function start: grouped, but
  // not a real name (no symbol or debug information names this code).
  bool named_by_address = false;
  // A kernel frame in a module: the module's name; its addresses are then relative to the
  // module's lowest symbol (the module is its own library).
  std::string kernel_module;
};

struct LibraryDescription {
  std::string name;  // base name
  std::string path;
  std::string debug_name;
  std::string debug_path;
  std::string code_id;      // GNU build-id, hex
  std::string breakpad_id;  // GUID form of the build-id plus age 0
  std::string arch;
};

// The Breakpad id of a GNU build-id: the first 16 bytes read as a little-endian GUID.
std::string breakpad_id_from_build_id(const std::vector<uint8_t>& build_id);

// The Go tables of the binary at `path`: the file is mapped while they are found through its
// headers (a copy, when another user could change it), and the table keeps copies of the
// read-only segments only. nullptr: not a Go binary, or not readable, or (with `required`) a
// file whose bytes do not hold that text, searched in the same mapping before the tables are
// read (Go labels: most programs never link the label setter).
std::unique_ptr<go::GoTable> load_go_table(const std::string& path, std::string_view required = {});

// The kernel's own build-id from /sys/kernel/notes (empty if unavailable).
std::vector<uint8_t> kernel_build_id();

class Symbolizer {
 public:
  explicit Symbolizer(SymbolizerOptions options = {});
  ~Symbolizer();

  // `path` names the library in the profile, `readable_path` is where its file can be
  // read; `reported_build_id` is the one the kernel gave with the mapping (may be empty).
  LibraryDescription describe_library(const std::string& path, const std::string& readable_path,
                                      const std::string& reported_build_id);
  LibraryDescription describe_kernel();

  // Never empty: at least one frame, possibly unnamed.
  std::vector<SymbolizedFrame> symbolize_in_file(const std::string& path, uint64_t file_offset);
  std::vector<SymbolizedFrame> symbolize_kernel(uint64_t address);
  // The kernel addresses symbolize_kernel will be asked for: only their symbols are read from
  // kallsyms (another address asked for later has all of them read then).
  void prepare_kernel(std::vector<uint64_t> addresses);
  // The same for an address relative to the library's load base (what a profile stores):
  // `path` is a readable copy of the library. Never empty.
  std::vector<SymbolizedFrame> symbolize_relative(const std::string& path, uint64_t relative);
  // A kernel address relative to the kernel's text (`module` empty) or to a module's lowest
  // symbol, as symbolize_kernel gives it. Never empty.
  std::vector<SymbolizedFrame> symbolize_kernel_relative(const std::string& module,
                                                         uint64_t relative);
  // Whether the code at `file_offset` of the library is the outermost frame of a thread
  // (DwarfModule::is_thread_root): a user stack whose outermost frame is not is cut short.
  // For a return address, pass the offset of its call instruction (the address minus one).
  bool is_thread_root(const std::string& library_path, uint64_t file_offset);
  // Code in a process's anonymous executable memory (JITs), named through its
  // /tmp/perf-PID.map when it has one that belongs to `owner_uid` (the process's effective
  // user) or root; `address` is absolute.
  std::vector<SymbolizedFrame> symbolize_jit(int pid, uint32_t owner_uid, uint64_t address);

 private:
  // Loaded as prepare_kernel said, unless `address` is not among those.
  const KernelSymbols* kernel_symbols(std::optional<uint64_t> address = std::nullopt);
  void load_kernel_symbols(std::span<const uint64_t> wanted);
  // The file whose symbol table names `binary`'s code: its separate debug file (found by
  // build-id) when the binary itself has no .symtab, else the binary.
  const ElfFile& symbol_source_for(const std::shared_ptr<const ElfFile>& binary);
  const DwarfModule* dwarf_for(const std::string& path);
  // Go's function tables of `elf` (read from `path`) when it is a Go binary, else nullptr.
  const go::GoTable* go_table_for(const std::string& path, const ElfFile& elf);
  // The frames at `vaddr` of `elf` (read from `path`), outermost first; never empty.
  std::vector<SymbolizedFrame> symbolize_vaddr(const std::string& path,
                                               const std::shared_ptr<const ElfFile>& elf,
                                               uint64_t vaddr);
  // The symbol that names `vaddr` in `binary` (nullopt: none), *named_by_address set when
  // only the call-frame information groups it.
  std::optional<NativeSymbolInfo> native_symbol_at(const std::shared_ptr<const ElfFile>& binary,
                                                   const DwarfModule* dwarf, uint64_t vaddr,
                                                   bool* named_by_address);

  SymbolizerOptions options_;

  ElfCache elf_cache_;
  std::unordered_map<const ElfFile*, std::shared_ptr<const ElfFile>> symbol_sources_;
  std::unordered_map<std::string, std::unique_ptr<DwarfModule>> dwarf_modules_;
  std::unordered_map<std::string, std::unique_ptr<go::GoTable>> go_tables_;
  std::unordered_map<int, std::optional<PerfMap>> perf_maps_;
  std::optional<KernelSymbols> kernel_symbols_;
  std::vector<uint64_t> kernel_addresses_;  // prepare_kernel's, sorted; empty: every symbol
  bool kernel_symbols_loaded_ = false;
};

}  // namespace bpfprof
