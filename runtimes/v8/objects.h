// V8 heap objects read from a live process (or a pretend one): a JSFunction's
// SharedFunctionInfo, its name (in the SFI or its ScopeInfo), its Script's name and source
// positions, and strings (sequential one- and two-byte, cons, thin, cached external). Every
// object's type is checked through its map before a field of it is trusted: the words come
// from stack slots
// that may not hold what a JS frame would, and a garbage collection moves objects under a
// cached address. Reads are bounded (RemoteReader's budget, string lengths, nesting).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "runtimes/v8/layout.h"

namespace bpfprof::v8 {

struct V8ReadLimits {
  size_t max_name_chars = 256;        // a function's or script's name, cut there
  size_t max_source_chars = 4 << 20;  // a script's source read for its line starts
  int max_string_depth = 32;          // cons and thin strings nested
  size_t max_string_pieces = 1024;    // strings read to make one (a cons tree may share them)
  size_t max_scope_locals = 1 << 16;
  size_t max_position_table_bytes = 1 << 20;  // a function's source position table
};

// From `code_offset` on (a bytecode offset), the code is at `script_offset` of its script's
// source (UTF-16 units; -1: no position).
struct SourcePositionEntry {
  int32_t code_offset = 0;
  int32_t script_offset = -1;
};
using SourcePositions = std::vector<SourcePositionEntry>;

// V8's source position table: per entry, the code offset's delta (zigzag VLQ; negative for an
// expression, -delta - 1; the first from -1, the function's entry) and the raw SourcePosition's
// delta (script offset + 1 from bit 1).
// Entries in order; nullopt when the bytes are not such a table (a value out of range, a cut
// entry, code offsets going back).
std::optional<SourcePositions> decode_source_positions(const uint8_t* bytes, size_t size);
// The script offset of the code at `code_offset` (the last entry at or before it); -1: none.
int32_t script_offset_at(const SourcePositions& positions, int32_t code_offset);

// What names a function, from its SharedFunctionInfo.
struct SharedInfo {
  std::string name;             // UTF-8; empty for an anonymous function
  uint64_t script = 0;          // the tagged Script; 0: none (a builtin, an API function)
  int32_t start_position = -1;  // in the script's source, UTF-16 units; -1: not known
};

class V8Heap {
 public:
  V8Heap(const V8Layout& layout, RemoteReader& reader, V8ReadLimits limits = {})
      : layout_(layout), reader_(reader), limits_(limits) {}

  // The instance type of the heap object `tagged` (through its map), if it is one.
  std::optional<uint32_t> instance_type(uint64_t tagged);
  std::optional<SharedInfo> read_shared(uint64_t shared);
  // A Script's name (a file path, a URL), if it has one.
  std::optional<std::string> script_name(uint64_t script);
  // Where each line of a Script's source starts (UTF-16 units): [0, ...].
  std::optional<std::vector<uint32_t>> script_line_starts(uint64_t script);
  // The BytecodeArray of the SharedFunctionInfo `shared`, if its function data is one (not
  // once compiled to baseline code, which keeps it elsewhere).
  std::optional<uint64_t> bytecode_of(uint64_t shared);
  // The source positions of the BytecodeArray `bytecode`; nullopt when it is not one or V8
  // did not make its table (source positions are made lazily: when an error's stack, the
  // debugger or V8's profiler asks for them).
  std::optional<SourcePositions> bytecode_positions(uint64_t bytecode);
  // A string's UTF-16 units, at most `max_units`.
  std::optional<std::u16string> read_string(uint64_t tagged, size_t max_units);

 private:
  std::optional<uint64_t> field(uint64_t tagged, uint32_t offset);
  bool is_string(uint64_t tagged);
  bool append_string(uint64_t tagged, size_t max_units, int depth, std::u16string& out);
  bool append_external(uint64_t tagged, uint32_t type, size_t length, size_t max_units,
                       std::u16string& out);
  // `units` characters at `address`, one byte or two each, appended to `out`.
  bool append_units(uint64_t address, bool one_byte, size_t units, std::u16string& out);
  size_t pieces_ = 0;  // of the string being read
  void read_scope_info(uint64_t scope_info, SharedInfo& info);
  // The source position table among a BytecodeArray's words after its length; 0: none made.
  uint64_t position_table(std::span<const uint64_t> words);

  const V8Layout& layout_;
  RemoteReader& reader_;
  V8ReadLimits limits_;
};

// The 1-based line of `position` given a source's line starts; 0 if unknown.
uint32_t line_of_position(const std::vector<uint32_t>& line_starts, int32_t position);

}  // namespace bpfprof::v8
