// A pretend V8 heap for the unit tests and the fuzzer of runtimes/v8: objects with maps, laid
// out as Node 20's V8 (11.3, no pointer compression) lays them, or Node 24's (V8 13.6), at
// made-up addresses.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "runtimes/kit/remote_memory.h"
#include "runtimes/v8/layout.h"
#include "runtimes/v8/objects.h"

namespace bpfprof::v8::fake {

// Node 20's values of the v8dbg_ symbols read (checked against /usr/bin/node in
// v8_objects_test).
inline V8Layout node20_layout() {
  V8Layout l;
  l.off_fp_function = -16;
  l.off_fp_bytecode_offset = -40;
  l.off_fp_bytecode_array = -32;
  l.heap_object_map = 0;
  l.map_instance_type = 12;
  l.function_shared = 24;
  l.shared_name_or_scope_info = 16;
  l.shared_script_or_debug_info = 32;
  l.script_name = 16;
  l.script_source = 8;
  l.string_length = 12;
  l.seq_one_byte_chars = 16;
  l.seq_two_byte_chars = 16;
  l.cons_first = 16;
  l.cons_second = 24;
  l.thin_actual = 16;
  l.sliced_parent = 16;
  l.sliced_offset = 24;
  l.fixed_array_length = 8;
  l.type_shared_function_info = 262;
  l.type_script = 167;
  l.type_scope_info = 261;
  l.first_nonstring_type = 128;
  l.string_encoding_mask = 8;
  l.string_representation_mask = 7;
  l.one_byte_string_tag = 8;
  l.seq_string_tag = 0;
  l.cons_string_tag = 1;
  l.thin_string_tag = 5;
  l.sliced_string_tag = 3;
  l.smi_shift_size = 31;
  l.shared_function_data = 8;
  l.bytecode_array_data = 54;
  l.type_bytecode_array = 191;
  l.type_byte_array = 190;
  l.external_string_tag = 2;
  l.external_string_resource = 16;
  return l;
}

// Node 24's (checked against the npm registry's node 24 in v8_objects_test): other offsets and
// types, the function's positions in its ScopeInfo's header, trusted position tables.
inline V8Layout node24_layout() {
  V8Layout l = node20_layout();
  l.function_shared = 32;
  l.shared_name_or_scope_info = 24;
  l.shared_script_or_debug_info = 40;
  l.type_shared_function_info = 282;
  l.type_scope_info = 280;
  l.shared_function_data = 0;
  l.bytecode_array_data = 64;
  l.type_bytecode_array = 186;
  l.type_byte_array = 217;
  l.type_trusted_byte_array = 196;
  l.type_bytecode_wrapper = 149;
  l.later_scope_info = true;
  return l;
}

// A source position table with entries (code offset, script offset) (0, 10) a statement,
// (5, 40) an expression, (12, 80): deltas (the first from -1), the code's zigzag-coded (an
// expression's as -delta - 1), the raw positions' (script offset + 1, from bit 1) too, 7 bits a
// byte.
inline const std::vector<uint8_t> kPositions{2, 44, 11, 120, 14, 0xa0, 0x01};

inline constexpr uint64_t kHeapAt = 0x100000;
inline uint64_t smi(int64_t v) { return static_cast<uint64_t>(v) << 32; }

// Objects appended one after the other; each returns its tagged address.
class Heap {
 public:
  explicit Heap(V8Layout layout = node20_layout()) : layout_(layout) {}

  uint64_t map(uint16_t type) {
    const uint64_t at = reserve(16);
    std::memcpy(bytes_.data() + (at - kHeapAt) + 12, &type, 2);
    return at + 1;
  }
  // An object of `type` whose words after its map are `words`.
  uint64_t object(uint16_t type, const std::vector<uint64_t>& words) {
    const uint64_t m = map(type);
    const uint64_t at = reserve(8 * (words.size() + 1));
    put(at, m);
    for (size_t i = 0; i < words.size(); ++i) put(at + 8 * (i + 1), words[i]);
    return at + 1;
  }
  uint64_t one_byte_string(const std::string& text) {
    const uint64_t m = map(8);  // ONE_BYTE_STRING_TYPE: sequential, one-byte
    const uint64_t at = reserve(16 + ((text.size() + 7) & ~size_t{7}));
    put(at, m);
    const int32_t length = static_cast<int32_t>(text.size());
    std::memcpy(bytes_.data() + (at - kHeapAt) + 12, &length, 4);
    std::memcpy(bytes_.data() + (at - kHeapAt) + 16, text.data(), text.size());
    return at + 1;
  }
  // An external one-byte string whose characters are `text`, placed in the heap too, their
  // address after the resource's unless `uncached` (then the type says not to read it).
  uint64_t external_string(const std::string& text, bool uncached = false) {
    const uint64_t chars = one_byte_string(text) - 1 + 16;
    const uint64_t s = object(uncached ? 2 | 8 | 16 : 2 | 8, {0, 0, chars});
    const int32_t length = static_cast<int32_t>(text.size());
    std::memcpy(bytes_.data() + (s - 1 - kHeapAt) + 12, &length, 4);
    return s;
  }
  uint64_t cons_string(uint64_t first, uint64_t second, int32_t length) {
    const uint64_t s = object(1 | 8, {0, first, second});
    std::memcpy(bytes_.data() + (s - 1 - kHeapAt) + 12, &length, 4);
    return s;
  }
  // The SharedFunctionInfo of a function named `name`, of a script `file` whose source is
  // `source`, starting at `start` in it; its ScopeInfo has `locals` context locals.
  uint64_t function(const std::string& name, const std::string& file, const std::string& source,
                    int32_t start, int locals = 0, uint64_t bytecode = 0) {
    const uint64_t undefined = object(131, {});
    const uint64_t script = object(167, {one_byte_string(source), one_byte_string(file)});
    const uint64_t scope_info = object(static_cast<uint16_t>(layout_.type_scope_info),
                                       scope_words(name, start, locals, undefined));
    std::vector<uint64_t> words(layout_.shared_script_or_debug_info / 8, 0);
    words[layout_.shared_name_or_scope_info / 8 - 1] = scope_info;
    words[layout_.shared_script_or_debug_info / 8 - 1] = script;
    if (layout_.shared_function_data) words[layout_.shared_function_data / 8 - 1] = bytecode;
    return object(static_cast<uint16_t>(layout_.type_shared_function_info), words);
  }
  uint64_t byte_array(const std::vector<uint8_t>& bytes) {
    return byte_array_of(static_cast<uint16_t>(layout_.type_byte_array), bytes);
  }
  uint64_t byte_array_of(uint16_t type, const std::vector<uint8_t>& bytes) {
    const uint64_t m = map(type);
    const uint64_t at = reserve(16 + ((bytes.size() + 7) & ~size_t{7}));
    put(at, m);
    put(at + 8, smi(static_cast<int64_t>(bytes.size())));
    std::memcpy(bytes_.data() + (at - kHeapAt) + 16, bytes.data(), bytes.size());
    return at + 1;
  }
  // A BytecodeArray whose source position table holds `positions` (`made`: else none made
  // yet, undefined), as Node 20 lays it out (bytecodes from offset 54) or Node 24 (from 64).
  uint64_t bytecode_array(const std::vector<uint8_t>& positions, bool made = true) {
    const uint64_t table = made ? position_table(positions) : object(131, {});
    const uint16_t type = static_cast<uint16_t>(layout_.type_bytecode_array);
    if (!layout_.type_bytecode_wrapper) {
      const uint64_t constant_pool = object(128 + 1, {smi(0)});  // a FixedArray
      return object(type,
                    {smi(4), constant_pool, byte_array({1, 2}), table, uint64_t{2} << 32 | 24, 0});
    }
    const uint16_t trusted = static_cast<uint16_t>(layout_.type_trusted_byte_array);
    const uint64_t wrapper = object(static_cast<uint16_t>(layout_.type_bytecode_wrapper), {0});
    return object(type, {smi(4), wrapper, table, byte_array_of(trusted, {1, 2}),
                         object(197, {smi(0)}), uint64_t{3} << 32 | 24, 0});
  }
  const std::string& bytes() const { return bytes_; }
  void place(BufferMemory& memory) const { memory.place(kHeapAt, bytes_); }

 private:
  uint64_t reserve(size_t size) {
    const uint64_t at = kHeapAt + bytes_.size();
    bytes_.resize(bytes_.size() + size, '\0');
    return at;
  }
  void put(uint64_t at, uint64_t word) { std::memcpy(bytes_.data() + (at - kHeapAt), &word, 8); }
  uint64_t position_table(const std::vector<uint8_t>& positions) {
    return byte_array_of(
        static_cast<uint16_t>(layout_.type_bytecode_wrapper ? layout_.type_trusted_byte_array
                                                            : layout_.type_byte_array),
        positions);
  }
  // A function's ScopeInfo after its map: flags, parameters, locals (V8 13: the positions
  // here), the locals' names and infos, the function's name and slot, an inferred name (none),
  // (before V8 13: the positions here).
  std::vector<uint64_t> scope_words(const std::string& name, int32_t start, int locals,
                                    uint64_t undefined) {
    const bool later = layout_.later_scope_info;
    std::vector<uint64_t> scope{later ? uint64_t{0x4171e2} : smi(0x4171e2), smi(1), smi(locals)};
    if (later) scope.insert(scope.end(), {smi(start), smi(start + 10)});
    for (int i = 0; i < locals; ++i) scope.push_back(one_byte_string("v" + std::to_string(i)));
    for (int i = 0; i < locals; ++i) scope.push_back(smi(i));
    scope.insert(scope.end(), {one_byte_string(name), smi(-1), undefined});
    if (!later) scope.insert(scope.end(), {smi(start), smi(start + 10)});
    return scope;
  }

  V8Layout layout_;
  std::string bytes_;
};

// A pretend heap's bytes at kHeapAt, read as runtimes/v8 reads a process: Node 20's layout.
struct Reading {
  explicit Reading(const std::string& bytes, V8ReadLimits limits = {}, uint64_t budget = 1 << 20,
                   V8Layout layout_read = node20_layout())
      : layout(layout_read), reader(memory, budget, 0), heap(layout, reader, limits) {
    memory.place(kHeapAt, bytes);
  }
  V8Layout layout;
  BufferMemory memory;
  RemoteReader reader;
  V8Heap heap;
};

}  // namespace bpfprof::v8::fake
