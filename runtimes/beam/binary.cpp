#include "runtimes/beam/binary.h"

#include <unistd.h>

#include <cstring>
#include <memory>
#include <unordered_map>
#include <vector>

#include "runtimes/kit/release.h"
#include "runtimes/kit/x86_code.h"
#include "symbols/elf/elf_file.h"
#include "symbols/util/read_file.h"
#include "symbols/util/untrusted_file.h"

namespace bpfprof {
namespace {

// Emulators are a few MB; a larger file named like one is not searched for its banner.
constexpr uint64_t kMaxBeamBinaryBytes = uint64_t{128} << 20;
// The code decoded: erts_lookup_function_info's start up to its header reads, find_range's loads.
constexpr size_t kDecodedBytes = 96;

// `size` bytes of the file at virtual address `vaddr`; empty when they are not all there.
std::vector<uint8_t> file_bytes(int fd, const ElfFile& elf, uint64_t vaddr, size_t size) {
  std::vector<uint8_t> bytes(size);
  if (!read_file_at_vaddr(fd, elf, vaddr, bytes.data(), size)) return {};
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

std::optional<uint64_t> only_call_return(std::span<const uint8_t> code, uint64_t address,
                                         uint64_t target) {
  std::optional<uint64_t> found;
  for (size_t i = 0; i + 5 <= code.size(); ++i) {
    if (code[i] != 0xe8) continue;
    int32_t displacement;
    memcpy(&displacement, code.data() + i + 1, 4);
    const uint64_t next = address + i + 5;
    if (next + static_cast<int64_t>(displacement) != target) continue;
    if (found) return std::nullopt;
    found = next;
  }
  return found;
}

bool has_imul_by(std::span<const uint8_t> code, uint64_t address, int64_t factor) {
  X86Decoder disassembler;
  return disassembler.each(code, address, [&](const cs_insn& insn) {
    const cs_x86& x86 = insn.detail->x86;
    return insn.id == X86_INS_IMUL && x86.op_count == 3 && x86.operands[2].type == X86_OP_IMM &&
           x86.operands[2].imm == factor;
  });
}

namespace {

constexpr const char* kCallNif =
    "_Z17beam_jit_call_nifP7processPKvPmPFmP18enif_environment_tiS3_EP14erl_module_nif";
const std::vector<std::string> kWalkSymbols{"the_active_code_index",
                                            "erts_atom_table",
                                            "erts_lookup_function_info",
                                            "erts_aligned_scheduler_data",
                                            "erts_aligned_dirty_cpu_scheduler_data",
                                            "erts_aligned_dirty_io_scheduler_data",
                                            "erts_no_schedulers",
                                            "erts_no_dirty_cpu_schedulers",
                                            "erts_no_dirty_io_schedulers",
                                            "beam_normal_exit",
                                            "erts_frame_layout",
                                            "__jit_debug_descriptor",
                                            "process_main",
                                            "erts_get_aux_work_data",
                                            "erts_call_dirty_nif",
                                            "erts_call_dirty_bif",
                                            kCallNif};

// The executable segment's bytes (the emulator's code, a few MB).
std::vector<uint8_t> text_bytes(int fd, const ElfFile& elf, uint64_t* vaddr) {
  for (const LoadSegment& segment : elf.load_segments()) {
    if (!segment.executable() || segment.file_size > kMaxBeamBinaryBytes) continue;
    std::vector<uint8_t> bytes(segment.file_size);
    if (!pread_exact(fd, bytes.data(), bytes.size(), segment.file_offset)) return {};
    *vaddr = segment.vaddr;
    return bytes;
  }
  return {};
}

// What the walk and the merge need beyond the code index; a rejection when it is not there.
std::optional<std::string> find_walk_facts(
    int fd, const ElfFile& elf, const std::unordered_map<std::string, DynamicSymbol>& symbols,
    BeamBinary& binary) {
  auto symbol = [&](const std::string& name) -> const DynamicSymbol* {
    auto it = symbols.find(name);
    return it == symbols.end() || !it->second.defined ? nullptr : &it->second;
  };
  const char* arrays[3] = {"erts_aligned_scheduler_data", "erts_aligned_dirty_cpu_scheduler_data",
                           "erts_aligned_dirty_io_scheduler_data"};
  const char* counts[3] = {"erts_no_schedulers", "erts_no_dirty_cpu_schedulers",
                           "erts_no_dirty_io_schedulers"};
  for (int i = 0; i < 3; ++i) {
    if (!symbol(arrays[i]) || !symbol(counts[i])) return "no scheduler data exported";
    binary.scheduler_arrays[i] = symbol(arrays[i])->address;
    binary.scheduler_counts[i] = symbol(counts[i])->address;
  }
  const DynamicSymbol* process_main = symbol("process_main");
  const DynamicSymbol* aux = symbol("erts_get_aux_work_data");
  if (!symbol("beam_normal_exit") || !symbol("erts_frame_layout") ||
      !symbol("__jit_debug_descriptor") || !process_main || !aux)
    return "no JIT entry points exported";
  binary.normal_exit = symbol("beam_normal_exit")->address;
  binary.frame_layout = symbol("erts_frame_layout")->address;
  binary.jit_descriptor = symbol("__jit_debug_descriptor")->address;
  if (!has_imul_by(file_bytes(fd, elf, aux->address, kDecodedBytes), aux->address,
                   binary.layout->scheduler_stride))
    return "the scheduler data are not laid out as its layout has them";
  uint64_t text_vaddr = 0;
  const std::vector<uint8_t> text = text_bytes(fd, elf, &text_vaddr);
  const std::optional<uint64_t> root = only_call_return(text, text_vaddr, process_main->address);
  if (!root) return "no one call of process_main found";
  binary.root_return = *root;
  auto range = [&](const std::string& name) {
    const DynamicSymbol* s = symbol(name);
    return s ? BeamCodeRange{s->address, s->address + s->size} : BeamCodeRange{};
  };
  binary.call_nif = range(kCallNif);
  binary.call_dirty_nif = range("erts_call_dirty_nif");
  binary.call_dirty_bif = range("erts_call_dirty_bif");
  return std::nullopt;
}

}  // namespace

std::variant<BeamBinary, BeamRejection> inspect_beam_binary(const std::string& readable_path) {
  const UntrustedOpen opened = open_untrusted(readable_path, UntrustedKind::kBinary);
  if (!opened.fd) return BeamRejection{"BEAM: cannot read the emulator"};
  const auto symbols = read_dynamic_symbols(opened.fd.get(), kWalkSymbols);
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
  BeamBinary binary;
  binary.layout = layout;
  binary.version = *version;
  binary.active_code_index = active;
  binary.ranges = ranges->ranges;
  binary.atom_table = atoms;
  if (std::optional<std::string> missing = find_walk_facts(opened.fd.get(), *elf, symbols, binary))
    return BeamRejection{"BEAM: ERTS " + release + ": " + *missing + ", frames not read"};
  return binary;
}

}  // namespace bpfprof
