#include "runtimes/beam/code_index.h"

#include <algorithm>
#include <cstring>

namespace bpfprof {
namespace {

// An MFA's three words; the layout's offsets lie in them.
constexpr uint32_t kMfaBytes = 24;

}  // namespace

std::optional<BeamCodeIndex::Generation> BeamCodeIndex::read_generation(
    RemoteReader& reader) const {
  const std::optional<uint32_t> index = reader.value<uint32_t>(addresses_.active_code_index);
  if (!index || *index >= 3) return std::nullopt;  // ERTS_NUM_CODE_IX
  const uint64_t table = addresses_.ranges + uint64_t{*index} * layout_.ranges_size;
  const std::optional<uint64_t> modules = reader.word(table + layout_.ranges_modules);
  const std::optional<uint64_t> count = reader.word(table + layout_.ranges_count);
  if (!modules || !count || *count > kMaxBeamModules || (*count && !*modules)) return std::nullopt;
  return Generation{*index, *modules, *count};
}

bool BeamCodeIndex::read_modules(RemoteReader& reader, const Generation& generation) {
  std::vector<uint8_t> bytes(generation.count * layout_.range_size);
  if (!bytes.empty() && !reader.read(generation.modules, bytes.data(), bytes.size())) return false;
  std::vector<Module> modules;
  modules.reserve(generation.count);
  for (uint64_t i = 0; i < generation.count; ++i) {
    Module m;
    memcpy(&m.start, bytes.data() + i * layout_.range_size + layout_.range_start, 8);
    memcpy(&m.end, bytes.data() + i * layout_.range_size + layout_.range_end, 8);
    // A table out of order is not one the emulator searches: not read as one.
    if (m.end < m.start || (!modules.empty() && m.start < modules.back().end)) return false;
    modules.push_back(m);
  }
  modules_ = std::move(modules);
  generation_ = generation;
  functions_.clear();  // a header's address may now hold another module
  ++tables_read_;
  return true;
}

const BeamCodeIndex::Module* BeamCodeIndex::module_at(uint64_t pc) const {
  auto after = std::upper_bound(modules_.begin(), modules_.end(), pc,
                                [](uint64_t p, const Module& m) { return p < m.start; });
  if (after == modules_.begin()) return nullptr;
  const Module& m = *(after - 1);
  return pc < m.end ? &m : nullptr;
}

std::optional<uint64_t> BeamCodeIndex::code_info_at(RemoteReader& reader, uint64_t header,
                                                    uint64_t pc) {
  auto it = functions_.find(header);
  if (it == functions_.end()) {
    const std::optional<uint64_t> count = reader.word(header + layout_.header_num_functions);
    if (!count || *count > kMaxBeamModuleFunctions) return std::nullopt;
    std::vector<uint64_t> functions(*count + 1);
    if (!reader.read(header + layout_.header_functions, functions.data(), functions.size() * 8) ||
        !std::is_sorted(functions.begin(), functions.end()))
      return std::nullopt;
    it = functions_.emplace(header, std::move(functions)).first;
  }
  const std::vector<uint64_t>& functions = it->second;
  // The last function starting at or below pc, if the next one starts above it.
  auto after = std::upper_bound(functions.begin(), functions.end(), pc);
  if (after == functions.begin() || after == functions.end()) return std::nullopt;
  return *(after - 1);
}

std::optional<std::string> BeamCodeIndex::atom_text(RemoteReader& reader, uint64_t atom) {
  if ((atom & kBeamAtomTagMask) != kBeamAtomTag || (atom >> 6) >= kMaxBeamAtomIndex)
    return std::nullopt;
  const uint32_t index = static_cast<uint32_t>(atom >> 6);
  if (auto it = atoms_.find(index); it != atoms_.end()) return it->second;
  const std::optional<uint64_t> segments =
      reader.word(addresses_.atom_table + layout_.atom_table_segments);
  const std::optional<uint64_t> segment =
      segments ? reader.word(*segments + uint64_t{index / kBeamAtomsPerSegment} * 8) : std::nullopt;
  const std::optional<uint64_t> entry =
      segment ? reader.word(*segment + uint64_t{index % kBeamAtomsPerSegment} * 8) : std::nullopt;
  const std::optional<int16_t> length =
      entry ? reader.value<int16_t>(*entry + layout_.atom_length) : std::nullopt;
  if (!length || *length < 0 || static_cast<uint32_t>(*length) > kMaxBeamAtomBytes)
    return std::nullopt;
  const std::optional<uint64_t> name = reader.word(*entry + layout_.atom_name);
  std::string text(static_cast<size_t>(*length), '\0');
  if (!name || (!text.empty() && !reader.read(*name, text.data(), text.size())))
    return std::nullopt;
  // Atoms are never freed or renumbered: kept for the emulator's life.
  atoms_.emplace(index, text);
  return text;
}

void BeamCodeIndex::follow(RemoteReader& reader, uint32_t index, uint64_t modules) {
  if (following(index, modules)) return;
  followed_ = {index, modules};
  if (const std::optional<Generation> now = read_generation(reader)) read_modules(reader, *now);
}

void BeamCodeIndex::check_generation(RemoteReader& reader) {
  const std::optional<Generation> now = read_generation(reader);
  if (now && *now != generation_) read_modules(reader, *now);
}

std::optional<BeamMfa> BeamCodeIndex::function_at(RemoteReader& reader, uint64_t pc) {
  const Module* module = module_at(pc);
  if (!module) {
    // A module loaded since the table was read: a new code index, read once it is seen.
    const std::optional<Generation> now = read_generation(reader);
    if (!now || *now == generation_ || !read_modules(reader, *now)) return std::nullopt;
    module = module_at(pc);
    if (!module) return std::nullopt;
  }
  const std::optional<uint64_t> code_info = code_info_at(reader, module->start, pc);
  uint8_t mfa[kMfaBytes];
  if (!code_info || !reader.read(*code_info + layout_.code_info_mfa, mfa, sizeof(mfa)))
    return std::nullopt;
  auto word = [&](uint32_t offset) {
    uint64_t value = 0;
    memcpy(&value, mfa + offset, 8);
    return value;
  };
  const uint64_t arity = word(layout_.mfa_arity);
  std::optional<std::string> name = atom_text(reader, word(layout_.mfa_module));
  std::optional<std::string> function = atom_text(reader, word(layout_.mfa_function));
  if (!name || !function || arity > kMaxBeamArity) return std::nullopt;
  return BeamMfa{std::move(*name), std::move(*function), static_cast<uint32_t>(arity)};
}

}  // namespace bpfprof
