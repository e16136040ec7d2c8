// The file that holds a module's .debug_frame, found without opening its DWARF: libdw, opening
// a separate debug file's DWARF, decompresses every debug section in it (libc6-dbg's libc.so.6:
// 2.3 MB of compressed .debug_info inflated, 84% of the time libc's unwind table took), where
// the unwind tables read .debug_frame alone (which libc's debug file does not even have).
#pragma once

#include <elfutils/libdwfl.h>
#include <libelf.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "symbols/util/unique_handle.h"

namespace bpfprof {

class DebugFrameFile {
 public:
  // `main` (the module's own ELF, at `path`) if it has a .debug_frame, else its separate debug
  // file as libdwfl's search finds it (find_debug_file, dwarf_module.h) if that has one
  // (decompressed, that section alone); else none.
  static DebugFrameFile find(Dwfl_Module* module, Elf* main, const std::string& path,
                             const std::vector<std::string>& symbol_dirs);

  // The file that holds .debug_frame, nullptr when there is none. Owned by this (or `main`).
  Elf* elf() const { return elf_; }
  // Its addresses less the main file's (0 unless the debug file was prelinked elsewhere),
  // modulo 2^64.
  uint64_t cfi_minus_vaddr() const { return cfi_minus_vaddr_; }

 private:
  UniqueFd fd_;
  std::unique_ptr<Elf, decltype(&elf_end)> owned_{nullptr, &elf_end};
  Elf* elf_ = nullptr;
  uint64_t cfi_minus_vaddr_ = 0;
};

}  // namespace bpfprof
