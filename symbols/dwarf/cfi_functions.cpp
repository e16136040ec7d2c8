#include "symbols/dwarf/cfi_functions.h"

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <libelf.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <string_view>
#include <unordered_map>

#include "symbols/util/leb128.h"
#include "symbols/util/sorted_ranges.h"

namespace bpfprof {
namespace {

// A call-frame section: its data and address.
struct FrameSection {
  Elf_Data* data = nullptr;
  uint64_t address = 0;
  bool is_eh_frame = true;
};

// .debug_frame in a separate debug file may be SHF_COMPRESSED: libdw (opening its DWARF) or
// DebugFrameFile (debug_frame_file.h) decompresses it before it is read here.
std::optional<FrameSection> find_frame_section(Elf* elf, CfiSection which) {
  Elf_Scn* section = cfi_section(elf, which);
  GElf_Shdr header;
  if (section == nullptr || gelf_getshdr(section, &header) == nullptr ||
      (header.sh_flags & SHF_COMPRESSED) != 0)
    return std::nullopt;
  Elf_Data* data = elf_getdata(section, nullptr);
  if (data == nullptr || data->d_buf == nullptr) return std::nullopt;
  return FrameSection{data, header.sh_addr, which == CfiSection::kEhFrame};
}

size_t encoded_size(uint8_t encoding) {
  switch (encoding & 0x0f) {
    case DW_EH_PE_absptr:
      return 8;
    case DW_EH_PE_udata2:
    case DW_EH_PE_sdata2:
      return 2;
    case DW_EH_PE_udata4:
    case DW_EH_PE_sdata4:
      return 4;
    case DW_EH_PE_udata8:
    case DW_EH_PE_sdata8:
      return 8;
    default:
      return 0;  // LEB128 forms: not used for code addresses by any toolchain we meet
  }
}

// What an FDE's reading needs of its CIE; nullopt for a CIE whose FDEs cannot be read.
struct CieFacts {
  uint8_t encoding = DW_EH_PE_absptr;  // of the FDEs' pointers (augmentation 'R')
  bool sized_augmentation = false;     // 'z': FDEs' augmentation data has its length first
  size_t fde_augmentation_size = 0;    // without 'z'
  bool signal_frame = false;           // 'S'
  std::span<const uint8_t> program;
  uint64_t code_alignment = 1;
  int64_t data_alignment = 1;
  bool program_known = true;
};

std::optional<CieFacts> cie_facts(const Dwarf_CIE& cie) {
  CieFacts facts;
  facts.program = {cie.initial_instructions,
                   static_cast<size_t>(cie.initial_instructions_end - cie.initial_instructions)};
  facts.code_alignment = cie.code_alignment_factor;
  facts.data_alignment = cie.data_alignment_factor;
  facts.fde_augmentation_size = cie.fde_augmentation_data_size;
  const std::string_view augmentation = cie.augmentation != nullptr ? cie.augmentation : "";
  if (augmentation.empty()) return facts;
  if (augmentation[0] != 'z') {  // old forms ("eh"): FDE pointers are absolute
    facts.program_known = false;
    return facts;
  }
  facts.sized_augmentation = true;
  size_t at = 0;
  for (char letter : augmentation.substr(1)) {
    if (letter == 'S') {
      facts.signal_frame = true;
      continue;
    }
    if (cie.augmentation_data == nullptr || at >= cie.augmentation_data_size) return std::nullopt;
    if (letter == 'R') facts.encoding = cie.augmentation_data[at++];
    if (letter == 'L') at += 1;
    if (letter == 'P') {  // personality: encoding byte, then the pointer
      const size_t size = encoded_size(cie.augmentation_data[at]);
      if (size == 0) return std::nullopt;
      at += 1 + size;
    }
  }
  return facts;
}

// A value of `encoding`'s format (sign-extended where signed), without its application.
std::optional<uint64_t> read_value(const uint8_t* at, const uint8_t* end, uint8_t encoding) {
  const size_t size = encoded_size(encoding);
  if (size == 0 || end - at < static_cast<ptrdiff_t>(size)) return std::nullopt;
  uint64_t value = 0;
  std::memcpy(&value, at, size);  // little-endian hosts and files: x86-64, aarch64
  const bool is_signed = (encoding & DW_EH_PE_signed) != 0 && size < 8;
  if (is_signed && (value >> (size * 8 - 1)) != 0) value |= ~uint64_t{0} << (size * 8);
  return value;
}

class FdeReader {
 public:
  FdeReader(Elf* elf, FrameSection section) : section_(section) {
    const char* ident = elf_getident(elf, nullptr);
    if (ident != nullptr) std::memcpy(ident_, ident, sizeof ident_);
  }

  std::vector<CfiFde> read_all() {
    std::vector<CfiFde> fdes;
    Dwarf_Off offset = 0;
    Dwarf_Off next = 0;
    Dwarf_CFI_Entry entry;
    while (dwarf_next_cfi(ident_, section_.data, section_.is_eh_frame, offset, &next, &entry) ==
           0) {
      if (!dwarf_cfi_cie_p(&entry)) {
        if (const std::optional<CfiFde> fde = read_fde(entry.fde)) fdes.push_back(*fde);
      }
      offset = next;
    }
    return fdes;
  }

 private:
  const std::optional<CieFacts>& cie_at(Dwarf_Off cie_offset) {
    auto [it, inserted] = cies_.try_emplace(cie_offset);
    Dwarf_Off next = 0;
    Dwarf_CFI_Entry cie;
    if (inserted &&
        dwarf_next_cfi(ident_, section_.data, section_.is_eh_frame, cie_offset, &next, &cie) == 0 &&
        dwarf_cfi_cie_p(&cie)) {
      it->second = cie_facts(cie.cie);
    }
    return it->second;
  }

  // initial_location (with its pc-relative application), address_range, the augmentation
  // data skipped, then the instructions.
  std::optional<CfiFde> read_fde(const Dwarf_FDE& fde) {
    const std::optional<CieFacts>& cie = cie_at(fde.CIE_pointer);
    if (!cie || (cie->encoding & 0x70) > DW_EH_PE_pcrel)
      return std::nullopt;  // textrel, datarel: not in .eh_frame FDEs
    const uint8_t encoding = cie->encoding;
    const auto* base = static_cast<const uint8_t*>(section_.data->d_buf);
    const std::optional<uint64_t> location = read_value(fde.start, fde.end, encoding);
    const uint8_t* at = fde.start + encoded_size(encoding);
    const std::optional<uint64_t> length = read_value(at, fde.end, encoding & 0x0f);
    if (!location || !length || *length == 0) return std::nullopt;
    at += encoded_size(encoding);
    uint64_t start = *location;
    if ((encoding & 0x70) == DW_EH_PE_pcrel)
      start += section_.address + static_cast<uint64_t>(fde.start - base);
    if (start == 0) return std::nullopt;  // discarded by the linker
    uint64_t augmentation = cie->fde_augmentation_size;
    if (cie->sized_augmentation) {
      const std::optional<uint64_t> size = read_uleb128(at, fde.end);
      if (!size) return std::nullopt;
      augmentation = *size;
    }
    if (augmentation > static_cast<uint64_t>(fde.end - at)) return std::nullopt;
    at += augmentation;
    return CfiFde{
        {start, start + *length}, cie->program,        {at, static_cast<size_t>(fde.end - at)},
        cie->code_alignment,      cie->data_alignment, cie->signal_frame,
        cie->program_known};
  }

  FrameSection section_;
  unsigned char ident_[EI_NIDENT] = {};
  std::unordered_map<Dwarf_Off, std::optional<CieFacts>> cies_;
};

}  // namespace

Elf_Scn* cfi_section(Elf* elf, CfiSection which) {
  const std::string_view wanted = which == CfiSection::kEhFrame ? ".eh_frame" : ".debug_frame";
  size_t section_names = 0;
  if (elf_getshdrstrndx(elf, &section_names) != 0) return nullptr;
  for (Elf_Scn* section = elf_nextscn(elf, nullptr); section != nullptr;
       section = elf_nextscn(elf, section)) {
    GElf_Shdr header;
    // lld types .eh_frame SHT_X86_64_UNWIND (libLLVM-14.so.1 here); GNU ld, SHT_PROGBITS.
    if (gelf_getshdr(section, &header) == nullptr ||
        (header.sh_type != SHT_PROGBITS && header.sh_type != SHT_X86_64_UNWIND))
      continue;
    const char* name = elf_strptr(elf, section_names, header.sh_name);
    if (name != nullptr && std::string_view(name) == wanted) return section;
  }
  return nullptr;
}

std::vector<CfiFde> read_fdes(Elf* elf, CfiSection section) {
  const std::optional<FrameSection> frames = find_frame_section(elf, section);
  if (!frames) return {};
  std::vector<CfiFde> fdes = FdeReader(elf, *frames).read_all();
  std::stable_sort(fdes.begin(), fdes.end(),
                   [](const CfiFde& a, const CfiFde& b) { return a.range.start < b.range.start; });
  return fdes;
}

std::vector<CodeRange> read_cfi_functions(Elf* elf, CfiSection section) {
  std::vector<CodeRange> ranges;
  for (const CfiFde& fde : read_fdes(elf, section)) ranges.push_back(fde.range);
  return ranges;
}

const CodeRange* find_code_range(const std::vector<CodeRange>& ranges, uint64_t vaddr) {
  const CodeRange* candidate = last_starting_at_or_below(ranges, vaddr, &CodeRange::start);
  return candidate && vaddr < candidate->end ? candidate : nullptr;
}

}  // namespace bpfprof
