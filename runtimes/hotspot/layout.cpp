#include "runtimes/hotspot/layout.h"

#include <initializer_list>
#include <utility>

namespace bpfprof::hotspot {

namespace {

// No HotSpot class is this large: an offset beyond it is not a field of the class.
constexpr uint64_t kMaxFieldOffset = 1 << 16;
// Class and method names beyond this are cut off by HotSpot's own printing too.
constexpr uint32_t kMaxSymbolBytes = 4096;
// JVMS 4.4: the tag of a CONSTANT_Utf8 entry.
constexpr uint8_t kConstantUtf8 = 1;

using FieldName = std::pair<std::string_view, std::string_view>;

std::string joined(std::string_view type, std::string_view field) {
  return std::string(type) + "::" + std::string(field);
}

// Takes entries from the tables, noting what is missing or implausible.
class LayoutTaker {
 public:
  explicit LayoutTaker(const VmStructs& structs) : structs_(structs) {}

  // The offset of the first of `names` the JVM exports (names change between releases).
  uint32_t offset(std::initializer_list<FieldName> names) {
    for (const auto& [type, field] : names) {
      const std::optional<uint64_t> at = structs_.offset_of(type, field);
      if (!at) continue;
      const std::optional<uint64_t> size = structs_.size_of(type);
      if (*at >= kMaxFieldOffset || (size && *size && *at >= *size)) {
        missing_.push_back(joined(type, field) + " at implausible offset " + std::to_string(*at));
        return 0;
      }
      return static_cast<uint32_t>(*at);
    }
    missing_.push_back(joined(names.begin()->first, names.begin()->second));
    return 0;
  }
  uint64_t address(std::string_view type, std::string_view field) {
    const std::optional<uint64_t> at = structs_.address_of(type, field);
    if (!at || !*at) missing_.push_back(joined(type, field));
    return at.value_or(0);
  }
  uint32_t size(std::string_view type) {
    const std::optional<uint64_t> size = structs_.size_of(type);
    if (!size || !*size || *size >= kMaxFieldOffset) {
      missing_.push_back("sizeof(" + std::string(type) + ")");
      return 0;
    }
    return static_cast<uint32_t>(*size);
  }
  // A constant the walk can do without (noted as absent).
  std::optional<int32_t> optional_constant(std::string_view name,
                                           std::vector<std::string>& absent) {
    std::optional<int32_t> value = structs_.int_constant(name);
    if (!value) absent.emplace_back(name);
    return value;
  }

  const std::vector<std::string>& missing() const { return missing_; }

 private:
  const VmStructs& structs_;
  std::vector<std::string> missing_;
};

void take_code_cache(LayoutTaker& t, HotSpotLayout& l) {
  l.code_cache_low_bound = t.address("CodeCache", "_low_bound");
  l.code_cache_high_bound = t.address("CodeCache", "_high_bound");
  l.code_cache_heaps = t.address("CodeCache", "_heaps");
  l.growable_array_length =
      t.offset({{"GrowableArrayBase", "_len"}, {"GenericGrowableArray", "_len"}});
  l.growable_array_data = t.offset({{"GrowableArray<int>", "_data"}});
  l.code_heap_memory = t.offset({{"CodeHeap", "_memory"}});
  l.code_heap_segment_map = t.offset({{"CodeHeap", "_segmap"}});
  l.code_heap_log2_segment_size = t.offset({{"CodeHeap", "_log2_segment_size"}});
  l.virtual_space_low = t.offset({{"VirtualSpace", "_low"}});
  l.virtual_space_high = t.offset({{"VirtualSpace", "_high"}});
  l.heap_block_size = t.size("HeapBlock");
  l.heap_block_used = t.offset({{"HeapBlock::Header", "_used"}});
}

void take_blobs(LayoutTaker& t, HotSpotLayout& l) {
  l.blob_name = t.offset({{"CodeBlob", "_name"}});
  l.blob_size = t.offset({{"CodeBlob", "_size"}});
  l.blob_frame_size = t.offset({{"CodeBlob", "_frame_size"}});
  l.blob_frame_complete = t.offset({{"CodeBlob", "_frame_complete_offset"}});
  l.blob_code_begin = t.offset({{"CodeBlob", "_code_begin"}});
  l.blob_code_end = t.offset({{"CodeBlob", "_code_end"}});
  l.compiled_method = t.offset({{"CompiledMethod", "_method"}, {"nmethod", "_method"}});
  l.nmethod_compile_id = t.offset({{"nmethod", "_compile_id"}});
}

void take_names(LayoutTaker& t, HotSpotLayout& l) {
  l.method_const_method = t.offset({{"Method", "_constMethod"}});
  l.const_method_constants = t.offset({{"ConstMethod", "_constants"}});
  l.const_method_name_index = t.offset({{"ConstMethod", "_name_index"}});
  l.const_method_signature_index = t.offset({{"ConstMethod", "_signature_index"}});
  l.constant_pool_size = t.size("ConstantPool");
  l.constant_pool_tags = t.offset({{"ConstantPool", "_tags"}});
  l.constant_pool_holder = t.offset({{"ConstantPool", "_pool_holder"}});
  l.constant_pool_length = t.offset({{"ConstantPool", "_length"}});
  l.array_length = t.offset({{"Array<int>", "_length"}});
  l.array_u1_data = t.offset({{"Array<u1>", "_data"}});
  l.instance_klass_constants = t.offset({{"InstanceKlass", "_constants"}});
  l.klass_name = t.offset({{"Klass", "_name"}});
  l.symbol_length = t.offset({{"Symbol", "_length"}});
  l.symbol_body = t.offset({{"Symbol", "_body"}});
}

void take_threads(LayoutTaker& t, HotSpotLayout& l) {
  l.java_thread_list = t.address("ThreadsSMRSupport", "_java_thread_list");
  l.threads_list_length = t.offset({{"ThreadsList", "_length"}});
  l.threads_list_threads = t.offset({{"ThreadsList", "_threads"}});
  l.java_thread_anchor = t.offset({{"JavaThread", "_anchor"}});
  l.anchor_last_java_sp = t.offset({{"JavaFrameAnchor", "_last_Java_sp"}});
  l.anchor_last_java_pc = t.offset({{"JavaFrameAnchor", "_last_Java_pc"}});
  l.anchor_last_java_fp = t.offset({{"JavaFrameAnchor", "_last_Java_fp"}});
  l.thread_osthread = t.offset({{"JavaThread", "_osthread"}, {"Thread", "_osthread"}});
  l.osthread_thread_id = t.offset({{"OSThread", "_thread_id"}});
  l.java_thread_thread_obj = t.offset({{"JavaThread", "_threadObj"}});
}

void take_interpreter(LayoutTaker& t, HotSpotLayout& l) {
  l.interpreter_code = t.address("AbstractInterpreter", "_code");
  l.stub_queue_buffer = t.offset({{"StubQueue", "_stub_buffer"}});
  l.stub_queue_limit = t.offset({{"StubQueue", "_buffer_limit"}});
  l.interpreter_frame_sender_sp =
      t.optional_constant("frame::interpreter_frame_sender_sp_offset", l.absent);
  l.interpreter_frame_last_sp =
      t.optional_constant("frame::interpreter_frame_last_sp_offset", l.absent);
  l.interpreter_frame_method =
      t.optional_constant("frame::interpreter_frame_method_offset", l.absent);
  l.interpreter_frame_bcp = t.optional_constant("frame::interpreter_frame_bcp_offset", l.absent);
}

// Lines and inlined methods: a JVM without them is still walked and named.
std::optional<DebugInfoLayout> take_debug_info(const VmStructs& structs,
                                               std::vector<std::string>& absent) {
  LayoutTaker t(structs);
  DebugInfoLayout d;
  d.const_method_size = t.size("ConstMethod");
  d.const_method_flags = t.offset({{"ConstMethod", "_flags"}});
  d.const_method_code_size = t.offset({{"ConstMethod", "_code_size"}});
  const std::optional<int32_t> flag = structs.int_constant("ConstMethod::_has_linenumber_table");
  d.nmethod_metadata = t.offset({{"nmethod", "_metadata_offset"}});
  d.scopes_data_begin = t.offset({{"CompiledMethod", "_scopes_data_begin"}});
  d.nmethod_scopes_pcs = t.offset({{"nmethod", "_scopes_pcs_offset"}});
  d.nmethod_dependencies = t.offset({{"nmethod", "_dependencies_offset"}});
  d.pc_desc_size = t.size("PcDesc");
  d.pc_desc_pc_offset = t.offset({{"PcDesc", "_pc_offset"}});
  d.pc_desc_scope_decode_offset = t.offset({{"PcDesc", "_scope_decode_offset"}});
  const bool flag_known = flag && *flag > 0 && *flag <= 0xffff;
  if (!flag_known) absent.emplace_back("ConstMethod::_has_linenumber_table");
  for (const std::string& name : t.missing()) absent.push_back(name);
  if (!flag_known || !t.missing().empty()) return std::nullopt;
  d.has_line_table = static_cast<uint16_t>(*flag);
  return d;
}

// Java threads' names: a JVM without them has its threads named as the kernel names them.
std::optional<ThreadNameLayout> take_thread_names(const VmStructs& structs,
                                                  std::vector<std::string>& absent) {
  LayoutTaker t(structs);
  ThreadNameLayout n;
  n.flags = t.address("JVMFlag", "flags");
  n.flag_count = t.address("JVMFlag", "numFlags");
  n.flag_size = t.size("JVMFlag");
  n.flag_name = t.offset({{"JVMFlag", "_name"}});
  n.flag_addr = t.offset({{"JVMFlag", "_addr"}});
  n.narrow_oop_base = t.address("CompressedOops", "_narrow_oop._base");
  n.narrow_oop_shift = t.address("CompressedOops", "_narrow_oop._shift");
  n.narrow_klass_base = t.address("CompressedKlassPointers", "_narrow_klass._base");
  n.narrow_klass_shift = t.address("CompressedKlassPointers", "_narrow_klass._shift");
  n.oop_klass =
      t.offset({{"oopDesc", "_metadata._compressed_klass"}, {"oopDesc", "_metadata._klass"}});
  n.klass_super = t.offset({{"Klass", "_super"}});
  n.instance_klass_fields = t.offset({{"InstanceKlass", "_fields"}});
  n.instance_klass_java_fields = t.offset({{"InstanceKlass", "_java_fields_count"}});
  n.array_u2_data = t.offset({{"Array<u2>", "_data"}});
  const auto constant = [&](const char* name, int32_t& out) {
    const std::optional<int32_t> value = structs.int_constant(name);
    if (!value || *value < 0 || *value > 64) absent.emplace_back(name);
    out = value.value_or(0);
    return value && *value >= 0 && *value <= 64;
  };
  bool known = constant("FieldInfo::field_slots", n.field_slots);
  known &= constant("FieldInfo::name_index_offset", n.field_name_index);
  known &= constant("FieldInfo::signature_index_offset", n.field_signature_index);
  known &= constant("FieldInfo::low_packed_offset", n.field_low_offset);
  known &= constant("FieldInfo::high_packed_offset", n.field_high_offset);
  known &= constant("FIELDINFO_TAG_SIZE", n.field_tag_size);
  for (const std::string& name : t.missing()) absent.push_back(name);
  if (!known || !t.missing().empty() || n.field_slots == 0) return std::nullopt;
  return n;
}

}  // namespace

std::variant<std::string, SymbolProblem> read_symbol(RemoteReader& reader,
                                                     const HotSpotLayout& layout,
                                                     uint64_t address) {
  const std::optional<uint16_t> length = reader.value<uint16_t>(address + layout.symbol_length);
  if (!length) return SymbolProblem::kUnreadable;
  if (*length > kMaxSymbolBytes) return SymbolProblem::kTooLong;
  std::string text(*length, '\0');
  if (!reader.read(address + layout.symbol_body, text.data(), text.size()))
    return SymbolProblem::kUnreadable;
  for (char c : text)
    if (static_cast<unsigned char>(c) < 0x20) return SymbolProblem::kNotAName;
  return text;
}

std::variant<HotSpotLayout, LayoutMissing> hotspot_layout(const VmStructs& structs) {
  LayoutTaker taker(structs);
  HotSpotLayout layout;
  take_code_cache(taker, layout);
  take_blobs(taker, layout);
  take_names(taker, layout);
  take_threads(taker, layout);
  take_interpreter(taker, layout);
  layout.debug_info = take_debug_info(structs, layout.absent);
  layout.thread_names = take_thread_names(structs, layout.absent);
  if (taker.missing().empty()) return layout;
  std::string reason = "HotSpot tables lack";
  for (size_t i = 0; i < taker.missing().size(); ++i)
    reason += (i ? ", " : " ") + taker.missing()[i];
  return LayoutMissing{reason};
}

namespace {

// Follows a Method's pointers to its names; the first problem ends it with a reason.
class MethodNamer {
 public:
  MethodNamer(RemoteReader& reader, const HotSpotLayout& layout) : r_(reader), l_(layout) {}

  std::variant<JavaMethodName, MethodNameError> name(uint64_t method);

 private:
  std::optional<uint64_t> word(uint64_t address, const char* what) {
    std::optional<uint64_t> value = r_.word(address);
    if (!value || !*value) note(what);
    return value && *value ? value : std::nullopt;
  }
  // Says why the last read failed, unless a reason is known already.
  std::nullopt_t note(const char* what) {
    if (reason_.empty())
      reason_ = std::string(what) + ": " +
                std::string(read_failure_name(r_.failure().value_or(ReadFailure::kNullPointer)));
    return std::nullopt;
  }
  // The Symbol in UTF-8 slot `index` of the pool at `pool` with `length` slots.
  std::optional<std::string> pool_symbol(uint64_t pool, uint64_t tags, int32_t length,
                                         uint16_t index, const char* what);
  std::optional<std::string> symbol(uint64_t address, const char* what);

  RemoteReader& r_;
  const HotSpotLayout& l_;
  std::string reason_;
};

std::optional<std::string> MethodNamer::symbol(uint64_t address, const char* what) {
  std::variant<std::string, SymbolProblem> text = read_symbol(r_, l_, address);
  if (auto* found = std::get_if<std::string>(&text)) return std::move(*found);
  switch (std::get<SymbolProblem>(text)) {
    case SymbolProblem::kUnreadable:
      return note(what);
    case SymbolProblem::kTooLong:
      reason_ = std::string(what) + ": " +
                std::to_string(r_.value<uint16_t>(address + l_.symbol_length).value_or(0)) +
                " bytes long";
      return std::nullopt;
    case SymbolProblem::kNotAName:
      reason_ = std::string(what) + ": not a name (control characters)";
      return std::nullopt;
  }
  return std::nullopt;
}

std::optional<std::string> MethodNamer::pool_symbol(uint64_t pool, uint64_t tags, int32_t length,
                                                    uint16_t index, const char* what) {
  if (index == 0 || index >= length) {
    reason_ = std::string(what) + ": index " + std::to_string(index) + " outside a pool of " +
              std::to_string(length);
    return std::nullopt;
  }
  const std::optional<uint8_t> tag = r_.value<uint8_t>(tags + l_.array_u1_data + index);
  if (!tag) return note(what);
  if (*tag != kConstantUtf8) {
    reason_ = std::string(what) + ": pool slot " + std::to_string(index) + " has tag " +
              std::to_string(*tag) + ", not UTF-8";
    return std::nullopt;
  }
  const std::optional<uint64_t> address = word(pool + l_.constant_pool_size + 8ull * index, what);
  if (!address) return std::nullopt;
  return symbol(*address, what);
}

// A MethodHandle intrinsic (linkToStatic, invokeBasic, ...: what a lambda's or a method
// handle's call goes through) is a Method of its own pool, made with it
// (Method::make_method_handle_intrinsic): three slots (an argument, the name, the signature)
// whose holder is MethodHandle, which keeps its own pool. Any other pool must be its holder's.
bool is_method_handle_intrinsic(const std::string& holder, int32_t pool_length) {
  constexpr int32_t kIntrinsicPoolLength = 3;
  return holder == "java/lang/invoke/MethodHandle" && pool_length == kIntrinsicPoolLength;
}

std::variant<JavaMethodName, MethodNameError> MethodNamer::name(uint64_t method) {
  auto failed = [&] { return MethodNameError{reason_.empty() ? "unreadable" : reason_}; };
  const auto const_method = word(method + l_.method_const_method, "Method::_constMethod");
  if (!const_method) return failed();
  const auto pool = word(*const_method + l_.const_method_constants, "ConstMethod::_constants");
  const auto name_index = r_.value<uint16_t>(*const_method + l_.const_method_name_index);
  const auto signature_index = r_.value<uint16_t>(*const_method + l_.const_method_signature_index);
  if (!pool || !name_index || !signature_index) {
    note("ConstMethod");
    return failed();
  }
  const auto tags = word(*pool + l_.constant_pool_tags, "ConstantPool::_tags");
  const auto length = r_.value<int32_t>(*pool + l_.constant_pool_length);
  const auto holder = word(*pool + l_.constant_pool_holder, "ConstantPool::_pool_holder");
  if (!tags || !length || !holder) {
    note("ConstantPool");
    return failed();
  }
  const auto tags_length = r_.value<int32_t>(*tags + l_.array_length);
  if (!tags_length || *tags_length != *length) {
    reason_ = "ConstantPool::_tags: not as long as the pool";
    return failed();
  }
  const auto klass_name = word(*holder + l_.klass_name, "Klass::_name");
  std::optional<std::string> klass = klass_name ? symbol(*klass_name, "class name") : std::nullopt;
  if (!klass) return failed();
  const auto holder_pool = word(*holder + l_.instance_klass_constants, "InstanceKlass::_constants");
  if (!holder_pool || (*holder_pool != *pool && !is_method_handle_intrinsic(*klass, *length))) {
    if (reason_.empty()) reason_ = "the pool's holder has another pool: not a Method";
    return failed();
  }
  auto method_name = pool_symbol(*pool, *tags, *length, *name_index, "method name");
  auto signature = pool_symbol(*pool, *tags, *length, *signature_index, "signature");
  if (!method_name || !signature) return failed();
  for (char& c : *klass)
    if (c == '/') c = '.';
  return JavaMethodName{std::move(*klass), std::move(*method_name), std::move(*signature)};
}

}  // namespace

std::variant<JavaMethodName, MethodNameError> read_method_name(RemoteReader& reader,
                                                               const HotSpotLayout& layout,
                                                               uint64_t method) {
  if (!method) return MethodNameError{"null Method*"};
  return MethodNamer(reader, layout).name(method);
}

}  // namespace bpfprof::hotspot
