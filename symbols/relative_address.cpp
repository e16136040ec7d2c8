#include "symbols/relative_address.h"

namespace bpfprof {

std::optional<uint64_t> relative_address(uint64_t ip, const MapEntry& map, const ElfFile& elf) {
  if (!map.contains(ip)) return std::nullopt;
  const std::optional<uint64_t> vaddr =
      elf.file_offset_to_vaddr(file_offset_for(ip, map.start, map.file_offset));
  if (!vaddr || *vaddr < elf.base_vaddr()) return std::nullopt;
  return *vaddr - elf.base_vaddr();
}

uint64_t relative_address_or_file_offset(uint64_t ip, const MapEntry& map, const ElfFile* elf) {
  if (elf != nullptr) {
    if (auto relative = relative_address(ip, map, *elf)) return *relative;
  }
  return file_offset_for(ip, map.start, map.file_offset);
}

std::optional<uint64_t> absolute_address(uint64_t relative, const MapEntry& map,
                                         const ElfFile& elf) {
  const std::optional<uint64_t> file_offset =
      elf.vaddr_to_file_offset(vaddr_for_relative(relative, elf));
  if (!file_offset || *file_offset < map.file_offset) return std::nullopt;
  const uint64_t ip = *file_offset - map.file_offset + map.start;
  if (!map.contains(ip)) return std::nullopt;
  return ip;
}

}  // namespace bpfprof
