// One ELF file read through libdwfl: its DWARF (found in the file, or in a separate debug
// file by build-id or .gnu_debuglink, under /usr/lib/debug, next to the file, in the
// --symbol-dir directories, or through debuginfod when DEBUGINFOD_URLS is set), giving for
// an address the chain of functions inlined there, with source file and line.
#pragma once

#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "symbols/dwarf/cfi_functions.h"
#include "symbols/dwarf/debug_frame_file.h"
#include "symbols/elf/elf_file.h"
#include "symbols/util/unique_handle.h"

namespace bpfprof {

struct SourceFunction {
  std::string name;  // linkage name when DWARF has one (mangled), else the plain name
  std::optional<std::string> file;
  std::optional<uint32_t> line;
};

// The separate debug file of `module` (main file `file_name`), searched where libdwfl's
// standard search looks (build-id trees of /usr/lib/debug and the symbol dirs, then the
// debuglink next to the file, in its .debug/ and under the debug roots), every candidate
// opened as an untrusted file and checked by build-id (else the debuglink's CRC); then the
// debuginfod servers of $DEBUGINFOD_URLS. A find_debuginfo callback for libdwfl: the fd,
// with *debuginfo_file_name set; -1 if none.
int find_debug_file(Dwfl_Module* module, const std::vector<std::string>& symbol_dirs,
                    const char* file_name, const char* debuglink_file, GElf_Word debuglink_crc,
                    char** debuginfo_file_name);

// A descriptor of the ELF file at `path` (or a duplicate of `fd` when that is open) to hand
// to dwfl_report_elf / dwfl_report_offline, which keep it when they accept the file. Opened
// as an untrusted binary, and invalid unless the file starts with the ELF magic: libdwfl
// decompresses what is not ELF (a bomb any user can map) and then closes the descriptor
// itself, which the caller's close on failure would close a second time. On failure the
// caller's UniqueFd closes it; on success the caller releases it.
UniqueFd elf_descriptor_for_libdwfl(const std::string& path, int fd = -1);

// What a module is opened for: its symbols and DWARF (the separate debug file's DWARF opened at
// once), or its call-frame information alone (the unwind tables: no DWARF opened).
enum class DwarfUse : uint8_t { kSymbols, kFrames };

class DwarfModule {
 public:
  // nullptr when libdwfl cannot read the file at all. With `fd` >= 0 the file is read from
  // that descriptor (duplicated; the caller keeps its own) and `path` only names it: the
  // debug-file search still looks next to `path`.
  static std::unique_ptr<DwarfModule> open(const std::string& path,
                                           const std::vector<std::string>& symbol_dirs, int fd = -1,
                                           DwarfUse use = DwarfUse::kSymbols);
  ~DwarfModule();
  DwarfModule(const DwarfModule&) = delete;
  DwarfModule& operator=(const DwarfModule&) = delete;

  // The functions at `vaddr` (an address of the file's own address space), outermost
  // first: the real function, then each function inlined into the previous one. Empty when
  // there is no DWARF for that address.
  std::vector<SourceFunction> functions_at(uint64_t vaddr) const;

  // The symbol libdwfl finds for `vaddr` in any table it can read (.symtab, .dynsym, a
  // debug file's, or MiniDebugInfo's xz-compressed .gnu_debugdata), by the same rules as
  // ElfFile (symbol_table.h); nullptr when none covers it.
  const Symbol* symbol_at(uint64_t vaddr) const;

  // The function that the call-frame information says holds `vaddr`: its .eh_frame FDE's
  // [start, end), in file addresses; nullptr when no FDE covers it.
  const CodeRange* cfi_function_at(uint64_t vaddr) const;

  // Whether `vaddr` is in the outermost frame of a thread: the call-frame information says
  // the return address is undefined there (glibc's _start, clone and clone3 mark it so), or
  // no CFI covers it and it is the entry point's stub (the dynamic loader's _start, whose
  // call to _dl_start returns a few bytes past the entry point).
  bool is_thread_root(uint64_t vaddr) const;

  // One section of call-frame information as libdwfl found it: .eh_frame from the file,
  // .debug_frame from the file or its separate debug file. `cfi` is nullptr when there is
  // none. Addresses in `cfi` (and in `elf`, the file that holds the section) are the file's
  // own virtual addresses plus `cfi_minus_vaddr` (0 unless the debug file was prelinked
  // elsewhere). Both handles belong to the module.
  struct CallFrameInfo {
    Dwarf_CFI* cfi = nullptr;
    Elf* elf = nullptr;
    uint64_t cfi_minus_vaddr = 0;  // modulo 2^64
  };
  CallFrameInfo call_frame_info(CfiSection section) const;

  // The file that holds `section`, to read its FDEs (read_fdes), with the offset of its
  // addresses as in CallFrameInfo; `elf` nullptr when there is none. A module opened for its
  // frames finds .debug_frame without DWARF (debug_frame_file.h); else as call_frame_info.
  struct FrameFile {
    Elf* elf = nullptr;
    uint64_t cfi_minus_vaddr = 0;
  };
  FrameFile frame_file(CfiSection section) const;

  // The file's own ELF handle (belongs to the module).
  Elf* elf() const;

  // The separate debug file that was found, if any.
  const std::string& debug_file() const { return debug_file_; }

 private:
  DwarfModule() = default;
  // What the CFI at `vaddr` says of the return address (undefined: a root); nullopt without.
  std::optional<bool> cfi_says_root(uint64_t vaddr) const;

  // The address ranges of a compilation unit's functions, built on first use, so that a
  // lookup descends into one function instead of walking the whole unit.
  struct FunctionRange {
    Dwarf_Addr low;
    Dwarf_Addr high;
    Dwarf_Off die;
  };

 public:
  using FunctionRangeEntry = FunctionRange;

 private:
  const std::vector<FunctionRange>& function_ranges(Dwarf_Die* cu) const;
  mutable std::unordered_map<Dwarf_Off, std::vector<FunctionRange>> function_ranges_;

  // libdwfl's function symbols sorted by address, read once: its own address lookup scans
  // the whole table every time.
  const std::vector<Symbol>& table_symbols() const;
  mutable std::optional<std::vector<Symbol>> table_symbols_;
  mutable std::optional<std::vector<CodeRange>> cfi_functions_;  // read on first use

  std::vector<std::string> symbol_dirs_;
  std::string path_;
  DwarfUse use_ = DwarfUse::kSymbols;
  mutable std::optional<DebugFrameFile> debug_frame_;  // kFrames: found on first use
  Dwfl_Callbacks callbacks_{};
  Dwfl* dwfl_ = nullptr;
  Dwfl_Module* module_ = nullptr;
  Dwarf_Addr bias_ = 0;  // libdwfl address = file vaddr + bias
  std::string debug_file_;

  static int find_debuginfo(Dwfl_Module* module, void** userdata, const char* module_name,
                            Dwarf_Addr base, const char* file_name, const char* debuglink_file,
                            GElf_Word debuglink_crc, char** debuginfo_file_name);
};

}  // namespace bpfprof
