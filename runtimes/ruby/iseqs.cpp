#include "runtimes/ruby/iseqs.h"

#include <algorithm>
#include <bit>

namespace bpfprof {

namespace {

// The succinct index (iseq.c's succ_index_table): 54 positions in 6 immediate words of 9
// 7-bit ranks each, then blocks of 512 positions (80 bytes: a 32-bit rank, a word of 9-bit
// ranks of its 64-bit parts, 8 words of bits).
constexpr uint32_t kImmediatePositions = 54;
constexpr size_t kImmediateWords = 6;
constexpr size_t kBlockWords = 10;
constexpr uint32_t kBlockPositions = 512;

std::optional<uint32_t> succinct_rank(const std::vector<uint64_t>& table, uint32_t x) {
  if (x < kImmediatePositions) {
    if (x / 9 >= table.size()) return std::nullopt;
    return static_cast<uint32_t>(table[x / 9] >> (x % 9 * 7) & 0x7f);
  }
  const size_t block = kImmediateWords + (x - kImmediatePositions) / kBlockPositions * kBlockWords;
  const uint32_t bit = (x - kImmediatePositions) % kBlockPositions;
  const uint32_t part = bit / 64;
  if (block + 2 + part >= table.size()) return std::nullopt;
  const uint32_t rank = static_cast<uint32_t>(table[block]);  // the low half: little-endian
  const uint32_t part_rank =
      part == 0 ? 0 : static_cast<uint32_t>(table[block + 1] >> ((part - 1) * 9) & 0x1ff);
  const int ones = std::popcount(table[block + 2 + part] << (63 - bit % 64));
  return rank + part_rank + static_cast<uint32_t>(ones);
}

bool is_type(uint64_t flags, const RubyLayout& l, uint32_t type) {
  return (flags & l.object_type_mask) == type;
}

bool read_lines(RemoteReader& reader, const RubyLayout& l, uint64_t body,
                const RubyIseqLimits& limits, RubyIseq& iseq) {
  const auto entries = reader.word(body + l.body_insns_info);
  const auto size = reader.value<uint32_t>(body + l.body_insns_info_size);
  const auto positions = reader.word(body + l.body_insns_positions);
  const auto succinct = reader.word(body + l.body_insns_succ_table);
  if (!entries || !size || !positions || !succinct || *size == 0 ||
      *size > limits.max_line_entries || l.insn_info_size < 4)
    return false;
  std::vector<uint8_t> raw(size_t{*size} * l.insn_info_size);
  if (!reader.read(*entries, raw.data(), raw.size())) return false;
  iseq.lines.resize(*size);
  for (uint32_t i = 0; i < *size; ++i) {
    int32_t line = 0;
    std::copy_n(raw.data() + size_t{i} * l.insn_info_size, sizeof(line),
                reinterpret_cast<uint8_t*>(&line));
    iseq.lines[i] = static_cast<uint32_t>(std::max(line, 0));
  }
  if (*size == 1) return true;
  if (*positions) {
    iseq.positions.resize(*size);
    return reader.read(*positions, iseq.positions.data(), iseq.positions.size() * 4);
  }
  if (!*succinct) return false;
  const size_t blocks =
      iseq.instructions <= kImmediatePositions
          ? 0
          : (iseq.instructions - kImmediatePositions + kBlockPositions - 1) / kBlockPositions;
  iseq.succinct.resize(kImmediateWords + blocks * kBlockWords);
  return reader.read(*succinct, iseq.succinct.data(), iseq.succinct.size() * 8);
}

bool is_imemo(uint64_t flags, const RubyLayout& l, uint32_t imemo_type) {
  return is_type(flags, l, l.type_imemo) && (flags >> l.imemo_shift & 0xf) == imemo_type;
}

// Element `index` of an Array, within its length.
std::optional<uint64_t> array_entry(RemoteReader& reader, const RubyLayout& l, uint64_t array,
                                    uint64_t index) {
  const auto flags = reader.word(array);
  if (!flags || !is_type(*flags, l, l.type_array)) return std::nullopt;
  if (*flags & l.array_embed) {
    if (index >= (*flags >> l.array_embed_length_shift & l.array_embed_length_mask))
      return std::nullopt;
    return reader.word(array + l.array_embedded + 8 * index);
  }
  const auto length = reader.word(array + l.array_length);
  const auto elements = reader.word(array + l.array_pointer);
  if (!length || !elements || index >= *length) return std::nullopt;
  return reader.word(*elements + 8 * index);
}

}  // namespace

std::optional<std::string> read_ruby_method_name(RemoteReader& reader, const RubyLayout& l,
                                                 uint64_t method_entry, uint64_t global_symbols,
                                                 const RubyIseqLimits& limits) {
  const auto flags = reader.word(method_entry);
  if (!global_symbols || !flags || !is_imemo(*flags, l, l.imemo_ment)) return std::nullopt;
  const auto definition = reader.word(method_entry + l.method_entry_def);
  const auto id = definition ? reader.word(*definition + l.definition_original_id) : std::nullopt;
  const auto last = reader.value<uint32_t>(global_symbols + l.symbols_last_id);
  const auto ids = reader.word(global_symbols + l.symbols_ids);
  if (!id || !last || !ids || l.id_entry_unit == 0) return std::nullopt;
  const uint64_t serial = *id > l.id_last_op ? *id >> l.id_scope_shift : *id;
  if (serial == 0 || serial > *last) return std::nullopt;
  const auto unit = array_entry(reader, l, *ids, serial / l.id_entry_unit);
  const auto name = unit ? array_entry(reader, l, *unit, serial % l.id_entry_unit * l.id_entry_size)
                         : std::nullopt;
  if (!name) return std::nullopt;
  return read_ruby_string(reader, l, *name, limits.max_text);
}

std::optional<std::string> read_ruby_string(RemoteReader& reader, const RubyLayout& l,
                                            uint64_t value, size_t max_bytes) {
  auto flags = reader.word(value);
  if (!flags) return std::nullopt;
  if (is_type(*flags, l, l.type_array)) {  // a pathobj: [path, realpath]
    const auto elements = *flags & l.array_embed ? std::optional(value + l.array_embedded)
                                                 : reader.word(value + l.array_pointer);
    const auto path = elements ? reader.word(*elements) : std::nullopt;
    if (!path) return std::nullopt;
    value = *path;
    flags = reader.word(value);
    if (!flags) return std::nullopt;
  }
  if (!is_type(*flags, l, l.type_string)) return std::nullopt;
  uint64_t data = value + l.string_embedded;
  uint64_t length = *flags >> l.string_embed_length_shift & l.string_embed_length_mask;
  if (*flags & l.string_no_embed) {
    const auto heap_length = reader.word(value + l.string_length);
    const auto heap_data = reader.word(value + l.string_pointer);
    if (!heap_length || !heap_data) return std::nullopt;
    length = *heap_length;
    data = *heap_data;
  }
  if (length > max_bytes) return std::nullopt;
  std::string text(length, '\0');
  if (!reader.read(data, text.data(), length)) return std::nullopt;
  return text;
}

std::optional<RubyIseq> read_ruby_iseq(RemoteReader& reader, const RubyLayout& l, uint64_t address,
                                       const RubyIseqLimits& limits) {
  const auto flags = reader.word(address);
  if (!flags || !is_imemo(*flags, l, l.imemo_iseq)) return std::nullopt;
  const auto body = reader.word(address + l.iseq_body);
  if (!body || !*body) return std::nullopt;
  RubyIseq iseq;
  const auto encoded = reader.word(*body + l.body_iseq_encoded);
  const auto instructions = reader.value<uint32_t>(*body + l.body_iseq_size);
  const auto label = reader.word(*body + l.body_label);
  const auto path = reader.word(*body + l.body_path);
  const auto first_line = reader.word(*body + l.body_first_line);
  if (!encoded || !instructions || !label || !path || !first_line ||
      *instructions > limits.max_instructions)
    return std::nullopt;
  iseq.encoded = *encoded;
  iseq.instructions = *instructions;
  iseq.first_line = static_cast<uint32_t>(*first_line >> 1);  // a Fixnum
  auto label_text = read_ruby_string(reader, l, *label, limits.max_text);
  auto path_text = read_ruby_string(reader, l, *path, limits.max_text);
  if (!label_text || !path_text) return std::nullopt;
  iseq.label = std::move(*label_text);
  iseq.path = std::move(*path_text);
  if (!read_lines(reader, l, *body, limits, iseq)) {
    iseq.lines.clear();  // named, without lines
    iseq.positions.clear();
    iseq.succinct.clear();
  }
  return iseq;
}

std::optional<uint32_t> RubyIseq::line_at(uint64_t pc) const {
  if (lines.empty() || pc < encoded || pc > encoded + uint64_t{instructions} * 8)
    return std::nullopt;
  uint32_t position = static_cast<uint32_t>((pc - encoded) / 8);
  if (position > 0) --position;
  if (lines.size() == 1) return lines[0];
  size_t index = 0;
  if (!positions.empty()) {
    auto after = std::upper_bound(positions.begin(), positions.end(), position);
    if (after == positions.begin()) return std::nullopt;
    index = static_cast<size_t>(after - positions.begin()) - 1;
  } else {
    const std::optional<uint32_t> rank = succinct_rank(succinct, position);
    if (!rank || *rank == 0) return std::nullopt;
    index = *rank - 1;
  }
  if (index >= lines.size()) return std::nullopt;
  return lines[index];
}

}  // namespace bpfprof
