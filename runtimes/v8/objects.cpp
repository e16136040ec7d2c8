#include "runtimes/v8/objects.h"

#include <algorithm>
#include <array>
#include <span>

#include "symbols/util/text.h"

namespace bpfprof::v8 {
namespace {

bool is_heap_object(uint64_t word) { return (word & 3) == 1; }
bool is_smi(uint64_t word) { return (word & 1) == 0; }
// A Smi in the upper half of the word (V8Layout::smi_shift_size 31).
int64_t smi_value(uint64_t word) { return static_cast<int64_t>(word) >> 32; }

// A ScopeInfo's first slots (after its map): flags, parameter count, context local count.
constexpr size_t kScopeHeaderSlots = 3;
// V8 13 on: then the function's start and end positions (in the tail before).
constexpr size_t kLaterScopeHeaderSlots = kScopeHeaderSlots + 2;
// Slots after the locals that may come before the function's name: the saved class variable
// and the receiver (Smis each), present by flags whose bits move between versions.
constexpr size_t kSlotsBeforeName = 2;
// Then the name and its slot index, an inferred name, the start and end positions.
constexpr size_t kScopeTailSlots = kSlotsBeforeName + 5;

// A zigzag VLQ integer at `at` (7 bits a byte, low first, 0x80: more), `at` moved past it;
// nullopt past the end or beyond 64 bits.
std::optional<int64_t> read_vlq(const uint8_t* bytes, size_t size, size_t& at) {
  uint64_t bits = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (at >= size) return std::nullopt;
    const uint8_t byte = bytes[at++];
    bits |= static_cast<uint64_t>(byte & 0x7f) << shift;
    if (!(byte & 0x80)) return static_cast<int64_t>(bits >> 1) ^ -static_cast<int64_t>(bits & 1);
  }
  return std::nullopt;
}

// A raw SourcePosition: bit 0 external, the script offset + 1 in bits 1-30, the inlining id
// above (bytecode: none); kept within 48 bits so that sums cannot overflow.
constexpr int64_t kMaxRawPosition = int64_t{1} << 48;
constexpr int64_t kScriptOffsetMask = (int64_t{1} << 30) - 1;

// A function's start and end positions (Smis, start <= end) make its start position.
void set_start_position(uint64_t start, uint64_t end, SharedInfo& info) {
  if (is_smi(start) && is_smi(end) && smi_value(start) >= 0 && smi_value(start) <= smi_value(end) &&
      smi_value(end) <= INT32_MAX)
    info.start_position = static_cast<int32_t>(smi_value(start));
}

}  // namespace

std::optional<SourcePositions> decode_source_positions(const uint8_t* bytes, size_t size) {
  SourcePositions out;
  // The deltas start from the function's entry, before its first bytecode (V8's
  // kFunctionEntryBytecodeOffset): from 0 every entry came one byte late, and a call sampled
  // got the position before its own.
  int64_t code = -1;
  int64_t raw = 0;
  size_t at = 0;
  while (at < size) {
    const std::optional<int64_t> code_delta = read_vlq(bytes, size, at);
    const std::optional<int64_t> raw_delta =
        code_delta ? read_vlq(bytes, size, at) : std::optional<int64_t>{};
    if (!raw_delta || *raw_delta <= -kMaxRawPosition || *raw_delta >= kMaxRawPosition ||
        *code_delta > INT32_MAX || *code_delta < -INT32_MAX)
      return std::nullopt;
    // A statement's delta as it is, an expression's as -delta - 1.
    code += *code_delta >= 0 ? *code_delta : -(*code_delta + 1);
    raw += *raw_delta;
    if (code > INT32_MAX || raw < 0 || raw >= kMaxRawPosition) return std::nullopt;
    out.push_back(
        {static_cast<int32_t>(code), static_cast<int32_t>(((raw >> 1) & kScriptOffsetMask) - 1)});
  }
  return out;
}

int32_t script_offset_at(const SourcePositions& positions, int32_t code_offset) {
  int32_t offset = -1;
  for (const SourcePositionEntry& e : positions) {
    if (e.code_offset > code_offset) break;
    offset = e.script_offset;
  }
  return offset;
}

std::optional<uint64_t> V8Heap::field(uint64_t tagged, uint32_t offset) {
  if (!is_heap_object(tagged)) return std::nullopt;
  return reader_.word(tagged - 1 + offset);
}

std::optional<uint32_t> V8Heap::instance_type(uint64_t tagged) {
  const std::optional<uint64_t> map = field(tagged, layout_.heap_object_map);
  if (!map || !is_heap_object(*map)) return std::nullopt;
  const auto type = reader_.value<uint16_t>(*map - 1 + layout_.map_instance_type);
  if (!type) return std::nullopt;
  return *type;
}

bool V8Heap::is_string(uint64_t tagged) {
  const std::optional<uint32_t> type = instance_type(tagged);
  return type && *type < layout_.first_nonstring_type;
}

bool V8Heap::append_string(uint64_t tagged, size_t max_units, int depth, std::u16string& out) {
  if (out.size() >= max_units) return true;  // cut at the bound
  if (depth > limits_.max_string_depth || ++pieces_ > limits_.max_string_pieces) return false;
  const std::optional<uint32_t> type = instance_type(tagged);
  if (!type || *type >= layout_.first_nonstring_type) return false;
  const auto length = reader_.value<int32_t>(tagged - 1 + layout_.string_length);
  if (!length || *length < 0) return false;
  const uint32_t representation = *type & layout_.string_representation_mask;
  if (representation == layout_.seq_string_tag) {
    const size_t units = std::min<size_t>(static_cast<size_t>(*length), max_units - out.size());
    const bool one_byte = (*type & layout_.string_encoding_mask) == layout_.one_byte_string_tag;
    return append_units(
        tagged - 1 + (one_byte ? layout_.seq_one_byte_chars : layout_.seq_two_byte_chars), one_byte,
        units, out);
  }
  if (representation == layout_.cons_string_tag) {
    const std::optional<uint64_t> first = field(tagged, layout_.cons_first);
    const std::optional<uint64_t> second = field(tagged, layout_.cons_second);
    return first && second && append_string(*first, max_units, depth + 1, out) &&
           append_string(*second, max_units, depth + 1, out);
  }
  if (representation == layout_.thin_string_tag) {
    const std::optional<uint64_t> actual = field(tagged, layout_.thin_actual);
    return actual && append_string(*actual, max_units, depth + 1, out);
  }
  if (representation == layout_.external_string_tag && layout_.external_string_resource)
    return append_external(tagged, *type, static_cast<size_t>(*length), max_units, out);
  return false;  // sliced strings: not read
}

// An external string's characters lie outside the heap, where the embedder keeps them (node:
// its own scripts' sources, in its binary). A cached one keeps their address after the
// resource pointer; an uncached one (V8's kUncachedExternalStringMask, 1 << 4 since V8 7)
// does not, and is not read.
bool V8Heap::append_external(uint64_t tagged, uint32_t type, size_t length, size_t max_units,
                             std::u16string& out) {
  constexpr uint32_t kUncachedExternalStringMask = 1 << 4;
  if (type & kUncachedExternalStringMask) return false;
  const std::optional<uint64_t> data = field(tagged, layout_.external_string_resource + 8);
  if (!data || !*data) return false;
  return append_units(*data, (type & layout_.string_encoding_mask) == layout_.one_byte_string_tag,
                      std::min(length, max_units - out.size()), out);
}

bool V8Heap::append_units(uint64_t address, bool one_byte, size_t units, std::u16string& out) {
  const size_t at = out.size();
  out.resize(at + units);
  if (!one_byte) return reader_.read(address, out.data() + at, units * 2);
  std::string bytes(units, '\0');
  if (!reader_.read(address, bytes.data(), units)) return false;
  for (size_t i = 0; i < units; ++i) out[at + i] = static_cast<unsigned char>(bytes[i]);
  return true;
}

std::optional<std::u16string> V8Heap::read_string(uint64_t tagged, size_t max_units) {
  std::u16string out;
  pieces_ = 0;
  if (!append_string(tagged, max_units, 0, out)) return std::nullopt;
  return out;
}

// The ScopeInfo's slots after its locals are found by their kinds rather than by its flags'
// bits: the name is the first string followed by a Smi (its slot index), then an optional
// inferred name (a string, or undefined), then the start and end positions (Smis).
void V8Heap::read_scope_info(uint64_t scope_info, SharedInfo& info) {
  const uint64_t slots = scope_info - 1 + layout_.fixed_array_length;
  const size_t header = layout_.later_scope_info ? kLaterScopeHeaderSlots : kScopeHeaderSlots;
  std::array<uint64_t, kLaterScopeHeaderSlots + 1> head{};
  if (!reader_.read(slots, head.data(), sizeof(head)) || !is_smi(head[2])) return;
  const int64_t locals = smi_value(head[2]);
  if (locals < 0 || static_cast<size_t>(locals) > limits_.max_scope_locals) return;
  if (layout_.later_scope_info)
    set_start_position(head[kScopeHeaderSlots], head[kScopeHeaderSlots + 1], info);
  size_t index = header;
  // Local names inline, else one hash table in their place; then each local's flags.
  if (locals > 0) index += is_string(head[header]) ? locals : 1;
  index += locals;
  std::array<uint64_t, kScopeTailSlots> tail{};
  if (!reader_.read(slots + index * 8, tail.data(), sizeof(tail))) return;
  for (size_t k = 0; k <= kSlotsBeforeName; ++k) {
    if (!is_heap_object(tail[k]) || !is_smi(tail[k + 1]) || !is_string(tail[k])) continue;
    if (auto name = read_string(tail[k], limits_.max_name_chars)) info.name = utf8_of_utf16(*name);
    size_t at = k + 2;
    if (is_heap_object(tail[at])) {
      if (info.name.empty() && is_string(tail[at]))
        if (auto inferred = read_string(tail[at], limits_.max_name_chars))
          info.name = utf8_of_utf16(*inferred);
      ++at;
    }
    if (!layout_.later_scope_info && at + 1 < tail.size())
      set_start_position(tail[at], tail[at + 1], info);
    return;
  }
}

std::optional<SharedInfo> V8Heap::read_shared(uint64_t shared) {
  if (instance_type(shared) != layout_.type_shared_function_info) return std::nullopt;
  const std::optional<uint64_t> name = field(shared, layout_.shared_name_or_scope_info);
  const std::optional<uint64_t> script = field(shared, layout_.shared_script_or_debug_info);
  if (!name || !script) return std::nullopt;
  SharedInfo info;
  if (instance_type(*script) == layout_.type_script) info.script = *script;
  if (is_string(*name)) {
    if (auto text = read_string(*name, limits_.max_name_chars)) info.name = utf8_of_utf16(*text);
  } else if (instance_type(*name) == layout_.type_scope_info) {
    read_scope_info(*name, info);
  }
  return info;
}

// A BytecodeArray after its length: its constant pool, handler table and source position table
// (tagged, the two tables ByteArrays, the positions' the second); from V8 13 its
// BytecodeWrapper, source position table, handler table (TrustedByteArrays) and constant pool;
// then untagged fields up to the bytecodes. The table is found by these types, not by an
// offset the metadata lacks.
std::optional<uint64_t> V8Heap::bytecode_of(uint64_t shared) {
  if (!layout_.shared_function_data) return std::nullopt;
  const std::optional<uint64_t> bytecode = field(shared, layout_.shared_function_data);
  if (!bytecode || instance_type(*bytecode) != layout_.type_bytecode_array) return std::nullopt;
  return bytecode;
}

std::optional<SourcePositions> V8Heap::bytecode_positions(uint64_t bytecode) {
  const uint32_t first = layout_.fixed_array_length + 8;
  if (!layout_.type_bytecode_array || !layout_.type_byte_array ||
      layout_.bytecode_array_data <= first ||
      instance_type(bytecode) != layout_.type_bytecode_array)
    return std::nullopt;
  std::array<uint64_t, 8> words{};
  const size_t count = std::min<size_t>(words.size(), (layout_.bytecode_array_data - first) / 8);
  if (!reader_.read(bytecode - 1 + first, words.data(), count * 8)) return std::nullopt;
  const uint64_t table = position_table(std::span(words.data(), count));
  const std::optional<uint64_t> length =
      table ? field(table, layout_.fixed_array_length) : std::optional<uint64_t>{};
  if (!length || !is_smi(*length) || smi_value(*length) < 0 ||
      static_cast<uint64_t>(smi_value(*length)) > limits_.max_position_table_bytes)
    return std::nullopt;
  std::vector<uint8_t> bytes(static_cast<size_t>(smi_value(*length)));
  if (!reader_.read(table - 1 + first, bytes.data(), bytes.size())) return std::nullopt;
  return decode_source_positions(bytes.data(), bytes.size());
}

uint64_t V8Heap::position_table(std::span<const uint64_t> words) {
  const auto typed = [&](uint64_t word, uint32_t type) {
    return type && is_heap_object(word) && instance_type(word) == type;
  };
  if (layout_.type_bytecode_wrapper && layout_.type_trusted_byte_array) {
    for (size_t i = 0; i + 1 < words.size(); ++i)
      if (typed(words[i], layout_.type_bytecode_wrapper))
        return typed(words[i + 1], layout_.type_trusted_byte_array) ? words[i + 1] : 0;
    return 0;
  }
  int byte_arrays = 0;
  for (uint64_t word : words)
    if (typed(word, layout_.type_byte_array) && ++byte_arrays == 2) return word;
  return 0;
}

std::optional<std::string> V8Heap::script_name(uint64_t script) {
  if (instance_type(script) != layout_.type_script) return std::nullopt;
  const std::optional<uint64_t> name = field(script, layout_.script_name);
  if (!name || !is_string(*name)) return std::nullopt;
  auto text = read_string(*name, limits_.max_name_chars * 4);
  if (!text) return std::nullopt;
  return utf8_of_utf16(*text);
}

std::optional<std::vector<uint32_t>> V8Heap::script_line_starts(uint64_t script) {
  if (instance_type(script) != layout_.type_script) return std::nullopt;
  const std::optional<uint64_t> source = field(script, layout_.script_source);
  if (!source) return std::nullopt;
  const std::optional<std::u16string> text = read_string(*source, limits_.max_source_chars);
  if (!text) return std::nullopt;
  std::vector<uint32_t> starts{0};
  for (size_t i = 0; i < text->size(); ++i)
    if ((*text)[i] == u'\n') starts.push_back(static_cast<uint32_t>(i + 1));
  return starts;
}

uint32_t line_of_position(const std::vector<uint32_t>& line_starts, int32_t position) {
  if (position < 0 || line_starts.empty()) return 0;
  const auto after =
      std::upper_bound(line_starts.begin(), line_starts.end(), static_cast<uint32_t>(position));
  return static_cast<uint32_t>(after - line_starts.begin());
}

}  // namespace bpfprof::v8
