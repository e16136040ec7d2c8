// V8's object and frame layout, from the post-mortem metadata a V8 binary exports for
// debuggers (Node.js: the v8dbg_* variables in its .dynsym): frame slot offsets, object field
// offsets, instance types and string tags of the exact build that runs. Read from the
// binary's initialized data (its file), not from a table per V8 version.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "runtimes/kit/release.h"
#include "runtimes/kit/remote_memory.h"
#include "runtimes/v8/events.h"

namespace bpfprof::v8 {

struct V8Layout {
  // Frame slots, from the frame pointer.
  int32_t off_fp_function = 0;
  int32_t off_fp_bytecode_offset = 0;
  int32_t off_fp_bytecode_array = 0;  // 0: not exported (interpreted frames at their first line)
  // Heap object fields, from the object's untagged address.
  uint32_t heap_object_map = 0;
  uint32_t map_instance_type = 0;
  uint32_t function_shared = 0;
  uint32_t shared_name_or_scope_info = 0;
  uint32_t shared_script_or_debug_info = 0;
  uint32_t script_name = 0;
  uint32_t script_source = 0;
  uint32_t string_length = 0;
  uint32_t seq_one_byte_chars = 0;
  uint32_t seq_two_byte_chars = 0;
  uint32_t cons_first = 0;
  uint32_t cons_second = 0;
  uint32_t thin_actual = 0;
  uint32_t sliced_parent = 0;
  uint32_t sliced_offset = 0;
  uint32_t fixed_array_length = 0;  // a ScopeInfo's slots begin after its map, as an array's
  // Instance types and string type bits.
  uint32_t type_shared_function_info = 0;
  uint32_t type_script = 0;
  uint32_t type_scope_info = 0;
  uint32_t first_nonstring_type = 0;
  uint32_t string_encoding_mask = 0;
  uint32_t string_representation_mask = 0;
  uint32_t one_byte_string_tag = 0;
  uint32_t seq_string_tag = 0;
  uint32_t cons_string_tag = 0;
  uint32_t thin_string_tag = 0;
  uint32_t sliced_string_tag = 0;
  // 31 where a Smi is the upper half of a word: the only form read (no pointer compression).
  uint32_t smi_shift_size = 0;
  // For the current line of interpreted frames; 0 where the binary does not say (no lines).
  uint32_t shared_function_data = 0;
  uint32_t bytecode_array_data = 0;  // where the bytecodes start (the header's size)
  uint32_t type_bytecode_array = 0;
  uint32_t type_byte_array = 0;
  // V8 13 on: a BytecodeArray's source position table is a TrustedByteArray, in the slot after
  // its BytecodeWrapper (before the handler table); 0 where the binary does not say.
  uint32_t type_trusted_byte_array = 0;
  uint32_t type_bytecode_wrapper = 0;
  // V8 13 and later (node 24, told by their metadata's names): their ScopeInfo keeps a
  // function's start and end positions in its header, not after its names.
  bool later_scope_info = false;
  // External strings (node's own scripts' sources); 0 where the binary does not say.
  uint32_t external_string_tag = 0;
  uint32_t external_string_resource = 0;
  // Where the binary keeps the code of V8's interpreter, as offsets in its file: two blocks of
  // its builtins (Builtins_*), its entry trampolines and its bytecode handlers; size 0: not
  // known (no .symtab).
  struct FileBlock {
    uint64_t offset = 0;
    uint64_t size = 0;
    bool operator==(const FileBlock&) const = default;
  };
  std::array<FileBlock, BPFPROF_V8_INTERPRETER_BLOCKS> interpreter_code{};

  bool operator==(const V8Layout&) const = default;
};

// The v8dbg_ symbols a layout is read from, without the prefix order meaning anything.
const std::vector<std::string>& v8_layout_symbol_names();

// `reader` reads the binary's image (its file's bytes at their virtual addresses, zeros for
// .bss); `address_of` the symbols' addresses there (0: absent). A layout whose values make
// no sense (an offset beyond 4 KiB, a frame slot not below the frame pointer) is an error.
// `version`: the binary's V8 release, where it says (its version string), for the facts its
// metadata lacks (the interpreter's frame slots before V8 10).
using SymbolAddresses = std::vector<uint64_t>;  // in v8_layout_symbol_names() order
std::variant<V8Layout, std::string> read_v8_layout(RemoteReader& reader,
                                                   const SymbolAddresses& addresses,
                                                   std::optional<RuntimeRelease> version = {});

// The V8 release in a node binary's bytes: "9.4.146.26-node.26".
std::optional<RuntimeRelease> node_v8_version(std::string_view binary);

}  // namespace bpfprof::v8
