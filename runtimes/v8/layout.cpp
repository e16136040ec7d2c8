#include "runtimes/v8/layout.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cstddef>

namespace bpfprof::v8 {
namespace {

// Each symbol and the layout member its 32-bit value goes to.
struct Field {
  const char* symbol;
  uint32_t V8Layout::*member;
  bool required = true;  // else absent gives 0
  // The symbol's name in later V8 versions (13: types spelt Tagged_T_, SFI's script alone).
  const char* later_symbol = nullptr;
  // Its name in V8 12 (node 22), where it differs from both: the old type spelt Tagged_T_.
  const char* v12_symbol = nullptr;
};

constexpr std::array kFields{
    Field{"v8dbg_class_HeapObject__map__Map", &V8Layout::heap_object_map},
    Field{"v8dbg_class_Map__instance_type__uint16_t", &V8Layout::map_instance_type},
    Field{"v8dbg_class_JSFunction__shared__SharedFunctionInfo", &V8Layout::function_shared},
    Field{"v8dbg_class_SharedFunctionInfo__name_or_scope_info__Object",
          &V8Layout::shared_name_or_scope_info, true,
          "v8dbg_class_SharedFunctionInfo__name_or_scope_info__Tagged_NameOrScopeInfoT_",
          "v8dbg_class_SharedFunctionInfo__name_or_scope_info__Tagged_Object_"},
    Field{"v8dbg_class_SharedFunctionInfo__script_or_debug_info__HeapObject",
          &V8Layout::shared_script_or_debug_info, true,
          "v8dbg_class_SharedFunctionInfo__script__Tagged_HeapObject_"},
    Field{"v8dbg_class_Script__name__Object", &V8Layout::script_name},
    Field{"v8dbg_class_Script__source__Object", &V8Layout::script_source, false},
    Field{"v8dbg_class_String__length__int32_t", &V8Layout::string_length},
    Field{"v8dbg_class_SeqOneByteString__chars__char", &V8Layout::seq_one_byte_chars},
    Field{"v8dbg_class_SeqTwoByteString__chars__char", &V8Layout::seq_two_byte_chars},
    Field{"v8dbg_class_ConsString__first__String", &V8Layout::cons_first},
    Field{"v8dbg_class_ConsString__second__String", &V8Layout::cons_second},
    Field{"v8dbg_class_ThinString__actual__String", &V8Layout::thin_actual},
    Field{"v8dbg_class_SlicedString__parent__String", &V8Layout::sliced_parent},
    Field{"v8dbg_class_SlicedString__offset__SMI", &V8Layout::sliced_offset},
    Field{"v8dbg_class_FixedArrayBase__length__SMI", &V8Layout::fixed_array_length},
    Field{"v8dbg_type_SharedFunctionInfo__SHARED_FUNCTION_INFO_TYPE",
          &V8Layout::type_shared_function_info},
    Field{"v8dbg_type_Script__SCRIPT_TYPE", &V8Layout::type_script},
    Field{"v8dbg_type_ScopeInfo__SCOPE_INFO_TYPE", &V8Layout::type_scope_info},
    Field{"v8dbg_FirstNonstringType", &V8Layout::first_nonstring_type},
    Field{"v8dbg_StringEncodingMask", &V8Layout::string_encoding_mask},
    Field{"v8dbg_StringRepresentationMask", &V8Layout::string_representation_mask},
    Field{"v8dbg_OneByteStringTag", &V8Layout::one_byte_string_tag},
    Field{"v8dbg_SeqStringTag", &V8Layout::seq_string_tag},
    Field{"v8dbg_ConsStringTag", &V8Layout::cons_string_tag},
    Field{"v8dbg_ThinStringTag", &V8Layout::thin_string_tag},
    Field{"v8dbg_SlicedStringTag", &V8Layout::sliced_string_tag},
    Field{"v8dbg_SmiShiftSize", &V8Layout::smi_shift_size},
    Field{"v8dbg_class_SharedFunctionInfo__function_data__Object", &V8Layout::shared_function_data,
          false},
    Field{"v8dbg_class_BytecodeArray__data__uintptr_t", &V8Layout::bytecode_array_data, false},
    Field{"v8dbg_type_BytecodeArray__BYTECODE_ARRAY_TYPE", &V8Layout::type_bytecode_array, false},
    Field{"v8dbg_type_ByteArray__BYTE_ARRAY_TYPE", &V8Layout::type_byte_array, false},
    Field{"v8dbg_type_TrustedByteArray__TRUSTED_BYTE_ARRAY_TYPE",
          &V8Layout::type_trusted_byte_array, false},
    Field{"v8dbg_type_BytecodeWrapper__BYTECODE_WRAPPER_TYPE", &V8Layout::type_bytecode_wrapper,
          false},
    Field{"v8dbg_ExternalStringTag", &V8Layout::external_string_tag, false},
    Field{"v8dbg_class_ExternalString__resource__Object", &V8Layout::external_string_resource,
          false},
};

constexpr const char* kFunctionSlot = "v8dbg_off_fp_function";
constexpr const char* kBytecodeOffsetSlot = "v8dbg_off_fp_bytecode_offset";
constexpr const char* kBytecodeArraySlot = "v8dbg_off_fp_bytecode_array";
// Field offsets and types beyond this are not a layout.
constexpr uint32_t kMaxValue = 4096;

std::variant<int32_t, std::string> frame_slot(RemoteReader& reader, uint64_t address,
                                              const char* name) {
  const std::optional<int32_t> value = address ? reader.value<int32_t>(address) : std::nullopt;
  if (!value) return std::string("V8 binary: no ") + name;
  // Slots lie below the frame pointer, a few words down.
  if (*value >= 0 || *value < -256 || *value % 8 != 0)
    return std::string("V8 binary: ") + name + " is " + std::to_string(*value);
  return *value;
}

}  // namespace

const std::vector<std::string>& v8_layout_symbol_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out{kFunctionSlot, kBytecodeOffsetSlot, kBytecodeArraySlot};
    for (const Field& field : kFields) out.emplace_back(field.symbol);
    for (const Field& field : kFields)
      if (field.later_symbol) out.emplace_back(field.later_symbol);
    for (const Field& field : kFields)
      if (field.v12_symbol) out.emplace_back(field.v12_symbol);
    return out;
  }();
  return names;
}

std::optional<RuntimeRelease> node_v8_version(std::string_view binary) {
  constexpr std::string_view kNodeSuffix = "-node.";
  for (size_t at = binary.find(kNodeSuffix); at != std::string_view::npos;
       at = binary.find(kNodeSuffix, at + 1)) {
    size_t start = at;
    while (
        start > 0 && at - start < 24 &&
        (std::isdigit(static_cast<unsigned char>(binary[start - 1])) || binary[start - 1] == '.'))
      --start;
    if (start == at || (start > 0 && binary[start - 1] != '\0')) continue;  // inside other text
    if (auto version = parse_release(binary.substr(start, at - start))) return version;
  }
  return std::nullopt;
}

std::variant<V8Layout, std::string> read_v8_layout(RemoteReader& reader,
                                                   const SymbolAddresses& addresses,
                                                   std::optional<RuntimeRelease> version) {
  if (addresses.size() != v8_layout_symbol_names().size()) return "V8 binary: symbols not given";
  V8Layout layout;
  auto function = frame_slot(reader, addresses[0], kFunctionSlot);
  if (auto* error = std::get_if<std::string>(&function)) return *error;
  layout.off_fp_function = std::get<int32_t>(function);
  // V8 8.9 to 9.x (node 16) export neither the interpreter's slots nor a Script's source: the
  // slots lie below the fixed frame's context, function and argument count (the function at
  // -16, as exported), the bytecode array, then its offset; the source is the field before
  // the name. Where V8 10 on exports them, they are these.
  const bool older_v8 =
      version && (version->major == 9 || (version->major == 8 && version->minor >= 9));
  if (older_v8 && !addresses[1] && !addresses[2] && layout.off_fp_function == -16) {
    layout.off_fp_bytecode_array = -32;
    layout.off_fp_bytecode_offset = -40;
  } else {
    auto bytecode_offset = frame_slot(reader, addresses[1], kBytecodeOffsetSlot);
    if (auto* error = std::get_if<std::string>(&bytecode_offset)) return *error;
    layout.off_fp_bytecode_offset = std::get<int32_t>(bytecode_offset);
  }
  if (addresses[2]) {
    auto bytecode_array = frame_slot(reader, addresses[2], kBytecodeArraySlot);
    if (auto* error = std::get_if<std::string>(&bytecode_array)) return *error;
    layout.off_fp_bytecode_array = std::get<int32_t>(bytecode_array);
  }
  constexpr size_t kSlots = 3;
  // The later names' addresses follow, in fields' order, then V8 12's.
  size_t later = kSlots + kFields.size();
  size_t v12 =
      later + static_cast<size_t>(std::count_if(kFields.begin(), kFields.end(), [](const Field& f) {
        return f.later_symbol != nullptr;
      }));
  for (size_t i = 0; i < kFields.size(); ++i) {
    uint64_t address = addresses[i + kSlots];
    if (kFields[i].later_symbol && !address) {
      address = addresses[later];
      // V8 13's spelling of the name (NameOrScopeInfoT) comes with its ScopeInfo's header;
      // V8 12 already spells the script as 13 does, with the older ScopeInfo.
      if (kFields[i].member == &V8Layout::shared_name_or_scope_info)
        layout.later_scope_info = address != 0;
    }
    if (kFields[i].v12_symbol && !address) address = addresses[v12];
    if (kFields[i].later_symbol) ++later;
    if (kFields[i].v12_symbol) ++v12;
    if (!address && !kFields[i].required) continue;
    // HeapObject's map at 0 and the tags of value 0 live in .bss: absent from a file's
    // symbols they would not be, so an absent symbol is missing metadata.
    const std::optional<uint32_t> value = address ? reader.value<uint32_t>(address) : std::nullopt;
    if (!value) return std::string("V8 binary: no ") + kFields[i].symbol;
    if (*value > kMaxValue)
      return std::string("V8 binary: ") + kFields[i].symbol + " is " + std::to_string(*value);
    layout.*kFields[i].member = *value;
  }
  if (!layout.script_source && older_v8 && layout.script_name == 16) layout.script_source = 8;
  // V8 13 on keep a function's positions in its ScopeInfo's header (by release where the
  // binary says it; else by the name's V8 13 spelling, above).
  if (version) layout.later_scope_info = version->major >= 13;
  // V8 14 (node 26) keeps its bytecode's positions otherwise than 13 (a current line read as
  // 13 reads it is wrong): its interpreted frames stay at their functions' first lines.
  if (version && version->major >= 14) {
    layout.off_fp_bytecode_array = 0;
    layout.shared_function_data = 0;
    layout.bytecode_array_data = 0;
  }
  if (!layout.script_source) return "V8 binary: no v8dbg_class_Script__source__Object";
  if (layout.smi_shift_size != 31) return "V8 binary: 32-bit Smis (pointer compression), not read";
  return layout;
}

}  // namespace bpfprof::v8
