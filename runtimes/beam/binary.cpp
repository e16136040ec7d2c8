#include "runtimes/beam/binary.h"

#include <unistd.h>

#include <memory>
#include <vector>

#include "runtimes/kit/release.h"
#include "runtimes/kit/x86_code.h"
#include "symbols/elf/elf_file.h"
#include "symbols/util/untrusted_file.h"

namespace bpfprof {
namespace {

// Emulators are a few MB; a larger file named like one is not searched for its banner.
constexpr uint64_t kMaxBeamBinaryBytes = uint64_t{128} << 20;
// The code decoded: erts_lookup_function_info's start up to its header reads, find_range's loads.
constexpr size_t kDecodedBytes = 96;

// `size` bytes of the file at virtual address `vaddr`; empty when they are not all there.
std::vector<uint8_t> file_bytes(int fd, const ElfFile& elf, uint64_t vaddr, size_t size) {
  const std::optional<uint64_t> offset = elf.vaddr_to_file_offset(vaddr);
  std::vector<uint8_t> bytes(size);
  if (!offset ||
      pread(fd, bytes.data(), size, static_cast<off_t>(*offset)) != static_cast<ssize_t>(size))
    return {};
  return bytes;
}

std::optional<ErtsVersion> banner_version(int fd, uint64_t size) {
  if (size == 0 || size > kMaxBeamBinaryBytes) return std::nullopt;
  constexpr std::string_view kBanner = "[erts-";
  constexpr size_t kReleaseChars = 24;
  std::optional<ErtsVersion> version;
  scan_file_text(fd, size, [&](std::string_view bytes) {
    const size_t at = bytes.find(kBanner);
    // One cut at the piece's end is whole at the next one's start.
    if (at == std::string_view::npos || at + kBanner.size() + kReleaseChars > bytes.size())
      return false;
    version = parse_release(bytes.substr(at + kBanner.size(), kReleaseChars));
    return true;
  });
  return version;
}

}  // namespace

bool is_beam_file_name(std::string_view base) { return base == "beam.smp"; }

const BeamLayout* beam_layout(const ErtsVersion& version) {
  if (version.major == 13 && version.minor == 1) return &kErts13_1;
  return nullptr;
}

std::optional<uint64_t> first_call_target(std::span<const uint8_t> code, uint64_t address) {
  X86Decoder disassembler;
  std::optional<uint64_t> target;
  disassembler.each(code, address, [&](const cs_insn& insn) {
    if (insn.id != X86_INS_CALL) return false;
    const cs_x86& x86 = insn.detail->x86;
    if (x86.op_count == 1 && x86.operands[0].type == X86_OP_IMM)
      target = static_cast<uint64_t>(x86.operands[0].imm);
    return true;
  });
  return target;
}

std::optional<BeamRangeCode> decode_find_range(std::span<const uint8_t> code, uint64_t address) {
  X86Decoder disassembler;
  BeamRangeCode found;
  disassembler.each(code, address, [&](const cs_insn& insn) {
    const cs_x86& x86 = insn.detail->x86;
    if (x86.op_count != 2) return false;
    const cs_x86_op& to = x86.operands[0];
    const cs_x86_op& from = x86.operands[1];
    if (insn.id == X86_INS_MOV && !found.active_code_index && to.type == X86_OP_REG && to.size == 4)
      found.active_code_index = rip_target(insn, from).value_or(0);
    else if (insn.id == X86_INS_LEA && !found.ranges)
      found.ranges = rip_target(insn, from).value_or(0);
    else if (insn.id == X86_INS_SHL && !found.stride_shift && to.type == X86_OP_REG &&
             from.type == X86_OP_IMM && from.imm > 0 && from.imm < 16)
      found.stride_shift = static_cast<uint32_t>(from.imm);
    return found.active_code_index && found.ranges && found.stride_shift;
  });
  if (!found.active_code_index || !found.ranges || !found.stride_shift) return std::nullopt;
  return found;
}

bool has_lea_displacement(std::span<const uint8_t> code, uint64_t address, int64_t displacement) {
  X86Decoder disassembler;
  return disassembler.each(code, address, [&](const cs_insn& insn) {
    const cs_x86& x86 = insn.detail->x86;
    return insn.id == X86_INS_LEA && x86.op_count == 2 && x86.operands[1].type == X86_OP_MEM &&
           x86.operands[1].mem.base != X86_REG_RIP &&
           x86.operands[1].mem.index == X86_REG_INVALID && x86.operands[1].mem.disp == displacement;
  });
}

std::variant<BeamBinary, BeamRejection> inspect_beam_binary(const std::string& readable_path) {
  const UntrustedOpen opened = open_untrusted(readable_path, UntrustedKind::kBinary);
  if (!opened.fd) return BeamRejection{"BEAM: cannot read the emulator"};
  const auto symbols = read_dynamic_symbols(
      opened.fd.get(), {"the_active_code_index", "erts_atom_table", "erts_lookup_function_info"});
  auto address = [&](const char* name) -> uint64_t {
    auto it = symbols.find(name);
    return it == symbols.end() || !it->second.defined ? 0 : it->second.address;
  };
  const uint64_t active = address("the_active_code_index");
  const uint64_t atoms = address("erts_atom_table");
  const uint64_t lookup = address("erts_lookup_function_info");
  if (!active || !atoms || !lookup)
    return BeamRejection{"BEAM: no code index or atom table exported, frames not read"};
  const std::optional<ErtsVersion> version = banner_version(opened.fd.get(), opened.size);
  if (!version) return BeamRejection{"BEAM: no ERTS release in the emulator, frames not read"};
  const BeamLayout* layout = beam_layout(*version);
  const std::string release = std::to_string(version->major) + "." +
                              std::to_string(version->minor) + "." + std::to_string(version->patch);
  if (!layout) return BeamRejection{"BEAM: ERTS " + release + ": no layout, frames not read"};
  std::string error;
  const std::unique_ptr<ElfFile> elf = ElfFile::open(
      "/proc/self/fd/" + std::to_string(opened.fd.get()), &error, ElfContents::kLayout);
  if (!elf) return BeamRejection{"BEAM: " + error};
  const std::vector<uint8_t> lookup_code = file_bytes(opened.fd.get(), *elf, lookup, kDecodedBytes);
  const std::optional<uint64_t> find_range = first_call_target(lookup_code, lookup);
  const std::vector<uint8_t> range_code =
      find_range ? file_bytes(opened.fd.get(), *elf, *find_range, kDecodedBytes)
                 : std::vector<uint8_t>{};
  const std::optional<BeamRangeCode> ranges = decode_find_range(range_code, find_range.value_or(0));
  if (!ranges || ranges->active_code_index != active ||
      (1u << ranges->stride_shift) != layout->ranges_size)
    return BeamRejection{"BEAM: ERTS " + release +
                         ": the range tables are not where its layout has them, frames not read"};
  if (!has_lea_displacement(lookup_code, lookup, layout->header_functions))
    return BeamRejection{
        "BEAM: ERTS " + release +
        ": module headers are not laid out as its layout has them, frames not read"};
  return BeamBinary{layout, *version, active, ranges->ranges, atoms};
}

}  // namespace bpfprof
