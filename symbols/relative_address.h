// Library-relative addresses, the form the Firefox Profiler stores frame addresses in:
// an offset from the library's load base, independent of where ASLR placed it.
//
//   file offset  = ip - mapping.start + mapping.file_offset
//   vaddr        = the ELF virtual address of that file offset (via PT_LOAD segments)
//   relative     = vaddr - base_vaddr   (base_vaddr: 0 for PIE/.so, 0x400000 for non-PIE)
#pragma once

#include <cstdint>
#include <optional>

#include "symbols/elf/elf_file.h"
#include "symbols/util/proc_maps.h"

namespace bpfprof {

// The offset within the mapped file of the byte at `ip`. Wraps (garbage) if ip < map_start.
constexpr uint64_t file_offset_for(uint64_t ip, uint64_t map_start, uint64_t map_file_offset) {
  return ip - map_start + map_file_offset;
}

// nullopt if ip lies outside the mapping or its file offset is in no PT_LOAD segment.
std::optional<uint64_t> relative_address(uint64_t ip, const MapEntry& map, const ElfFile& elf);

// relative_address, falling back to the file offset when the ELF file is unavailable
// (nullptr) or does not cover the offset. For PIE executables and shared objects, whose
// segments have p_offset == p_vaddr, the fallback gives the same answer.
uint64_t relative_address_or_file_offset(uint64_t ip, const MapEntry& map, const ElfFile* elf);

// The ELF virtual address (what symbol tables use) for a library-relative address.
inline uint64_t vaddr_for_relative(uint64_t relative, const ElfFile& elf) {
  return relative + elf.base_vaddr();
}

// The inverse of relative_address: the absolute address in `map` at which `relative` is
// loaded; nullopt if that address would fall outside the mapping.
std::optional<uint64_t> absolute_address(uint64_t relative, const MapEntry& map,
                                         const ElfFile& elf);

}  // namespace bpfprof
