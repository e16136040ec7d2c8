#include "runtimes/hotspot/thread_names.h"

#include <algorithm>

#include "symbols/util/text.h"

namespace bpfprof::hotspot {
namespace {

// A byte array's length and first element from the array object, by how class pointers are
// kept (HotSpot's arrayOopDesc: the length after the class pointer, elements from the next
// 8-byte boundary).
struct ArrayLayout {
  uint32_t length;
  uint32_t base;
};
ArrayLayout array_layout(uint32_t oop_klass, bool compressed_klass_pointers) {
  const uint32_t length = oop_klass + (compressed_klass_pointers ? 4 : 8);
  return {length, (length + 4 + 7) & ~7u};
}

}  // namespace

std::string java_string_utf8(const std::vector<uint8_t>& bytes, bool utf16) {
  std::string out;
  if (!utf16) {
    for (uint8_t b : bytes) append_utf8(out, b);
    return out;
  }
  std::u16string units(bytes.size() / 2, u'\0');
  for (size_t i = 0; i < units.size(); ++i)
    units[i] = static_cast<char16_t>(bytes[2 * i] | bytes[2 * i + 1] << 8);
  return utf8_of_utf16(units);
}

std::optional<bool> JavaThreadNames::flag(RemoteReader& reader, const std::string& name) {
  const std::optional<uint64_t> flags = reader.word(n_.flags);
  const std::optional<uint64_t> count = reader.word(n_.flag_count);
  if (!flags || !*flags || !count || *count > 8192) return std::nullopt;
  for (uint64_t i = 0; i < *count; ++i) {
    const uint64_t entry = *flags + i * n_.flag_size;
    const std::optional<uint64_t> name_at = reader.word(entry + n_.flag_name);
    if (!name_at || !*name_at) continue;
    if (reader.c_string(*name_at) != name) continue;
    const std::optional<uint64_t> value_at = reader.word(entry + n_.flag_addr);
    if (!value_at) return std::nullopt;
    const std::optional<uint8_t> value = reader.value<uint8_t>(*value_at);
    if (!value) return std::nullopt;
    return *value != 0;
  }
  return std::nullopt;
}

bool JavaThreadNames::read_compression(RemoteReader& reader) {
  if (compression_) return true;
  const std::optional<bool> oops = flag(reader, "UseCompressedOops");
  const std::optional<bool> klass = flag(reader, "UseCompressedClassPointers");
  const std::optional<uint64_t> oop_base = reader.word(n_.narrow_oop_base);
  const std::optional<int32_t> oop_shift = reader.value<int32_t>(n_.narrow_oop_shift);
  const std::optional<uint64_t> klass_base = reader.word(n_.narrow_klass_base);
  const std::optional<int32_t> klass_shift = reader.value<int32_t>(n_.narrow_klass_shift);
  if (!oops || !klass || !oop_base || !oop_shift || !klass_base || !klass_shift || *oop_shift < 0 ||
      *oop_shift > 8 || *klass_shift < 0 || *klass_shift > 8)
    return false;
  compression_ = Compression{*oops, *klass, *oop_base, *oop_shift, *klass_base, *klass_shift};
  return true;
}

std::optional<uint64_t> JavaThreadNames::klass_of(RemoteReader& reader, uint64_t oop) {
  if (compression_->klass_pointers) {
    const std::optional<uint32_t> narrow = reader.value<uint32_t>(oop + n_.oop_klass);
    if (!narrow || !*narrow) return std::nullopt;
    return compression_->klass_base + (uint64_t{*narrow} << compression_->klass_shift);
  }
  const std::optional<uint64_t> klass = reader.word(oop + n_.oop_klass);
  return klass && *klass ? klass : std::nullopt;
}

std::optional<uint64_t> JavaThreadNames::reference(RemoteReader& reader, uint64_t address) {
  if (compression_->oops) {
    const std::optional<uint32_t> narrow = reader.value<uint32_t>(address);
    if (!narrow || !*narrow) return std::nullopt;
    return compression_->oop_base + (uint64_t{*narrow} << compression_->oop_shift);
  }
  const std::optional<uint64_t> oop = reader.word(address);
  return oop && *oop ? oop : std::nullopt;
}

std::optional<std::string> JavaThreadNames::symbol(RemoteReader& reader, uint64_t symbol_address) {
  std::variant<std::string, SymbolProblem> text = read_symbol(reader, l_, symbol_address);
  if (auto* found = std::get_if<std::string>(&text)) return std::move(*found);
  return std::nullopt;
}

std::optional<uint32_t> JavaThreadNames::own_field_offset(RemoteReader& reader, uint64_t klass,
                                                          const std::string& name,
                                                          const std::string& signature) {
  const std::optional<uint64_t> fields = reader.word(klass + n_.instance_klass_fields);
  const std::optional<uint16_t> count =
      reader.value<uint16_t>(klass + n_.instance_klass_java_fields);
  const std::optional<uint64_t> pool = reader.word(klass + l_.instance_klass_constants);
  if (!fields || !*fields || !count || *count > kMaxFields || !pool || !*pool) return std::nullopt;
  const std::optional<int32_t> pool_length = reader.value<int32_t>(*pool + l_.constant_pool_length);
  if (!pool_length || *pool_length <= 0 || *pool_length > 65535) return std::nullopt;
  const auto slot = [&](uint32_t field, int32_t at) {
    return reader.value<uint16_t>(*fields + n_.array_u2_data +
                                  2 * (uint64_t{field} * n_.field_slots + at));
  };
  const auto pool_symbol = [&](std::optional<uint16_t> index) -> std::optional<std::string> {
    if (!index || *index == 0 || *index >= *pool_length) return std::nullopt;
    const std::optional<uint64_t> at =
        reader.word(*pool + l_.constant_pool_size + 8 * uint64_t{*index});
    return at && *at ? symbol(reader, *at) : std::nullopt;
  };
  for (uint32_t i = 0; i < *count; ++i) {
    if (pool_symbol(slot(i, n_.field_name_index)) != name ||
        pool_symbol(slot(i, n_.field_signature_index)) != signature)
      continue;
    const std::optional<uint16_t> low = slot(i, n_.field_low_offset);
    const std::optional<uint16_t> high = slot(i, n_.field_high_offset);
    if (!low || !high) return std::nullopt;
    const uint32_t packed = (uint32_t{*high} << 16) | *low;
    const uint32_t offset = packed >> n_.field_tag_size;
    return offset > 0 && offset < 4096 ? std::optional<uint32_t>(offset) : std::nullopt;
  }
  return std::nullopt;
}

std::optional<uint32_t> JavaThreadNames::field_offset(RemoteReader& reader, uint64_t klass,
                                                      const std::string& name,
                                                      const std::string& signature) {
  const std::string key = std::to_string(klass) + " " + name + " " + signature;
  if (auto cached = offsets_.find(key); cached != offsets_.end()) return cached->second;
  std::optional<uint32_t> offset;
  uint64_t current = klass;
  for (int depth = 0; depth <= kMaxSuperclasses && current && !offset; ++depth) {
    offset = own_field_offset(reader, current, name, signature);
    current = reader.word(current + n_.klass_super).value_or(0);
  }
  if (offsets_.size() < 1024) offsets_.emplace(key, offset);
  return offset;
}

std::optional<std::string> JavaThreadNames::string_value(RemoteReader& reader,
                                                         uint64_t string_oop) {
  const std::optional<uint64_t> klass = klass_of(reader, string_oop);
  const std::optional<uint64_t> name_symbol =
      klass ? reader.word(*klass + l_.klass_name) : std::nullopt;
  if (!name_symbol || symbol(reader, *name_symbol) != "java/lang/String") return std::nullopt;
  const std::optional<uint32_t> value_at = field_offset(reader, *klass, "value", "[B");
  const std::optional<uint32_t> coder_at = field_offset(reader, *klass, "coder", "B");
  if (!value_at || !coder_at) return std::nullopt;
  const std::optional<uint64_t> value = reference(reader, string_oop + *value_at);
  const std::optional<uint8_t> coder = reader.value<uint8_t>(string_oop + *coder_at);
  if (!value || !coder || *coder > 1) return std::nullopt;
  const ArrayLayout array = array_layout(n_.oop_klass, compression_->klass_pointers);
  const std::optional<int32_t> length = reader.value<int32_t>(*value + array.length);
  if (!length || *length < 0) return std::nullopt;
  const int32_t bytes = std::min(*length, kMaxNameUnits * (*coder ? 2 : 1));
  std::vector<uint8_t> data(static_cast<size_t>(bytes));
  if (bytes && !reader.read(*value + array.base, data.data(), data.size())) return std::nullopt;
  return java_string_utf8(data, *coder == 1);
}

std::optional<JavaThreadName> JavaThreadNames::thread_name(RemoteReader& reader, uint64_t slot) {
  const uint64_t thread = reader.word(slot).value_or(0);
  const uint64_t os = thread ? reader.word(thread + l_.thread_osthread).value_or(0) : 0;
  const int32_t tid = os ? reader.value<int32_t>(os + l_.osthread_thread_id).value_or(0) : 0;
  // JavaThread::_threadObj: an OopHandle, a pointer to the slot that holds the oop.
  const uint64_t handle = thread ? reader.word(thread + l_.java_thread_thread_obj).value_or(0) : 0;
  const uint64_t oop = handle ? reader.word(handle).value_or(0) : 0;
  if (tid <= 0 || !oop) return std::nullopt;
  const std::optional<uint64_t> klass = klass_of(reader, oop);
  if (!klass) return std::nullopt;
  const std::optional<uint32_t> name_at =
      field_offset(reader, *klass, "name", "Ljava/lang/String;");
  if (!name_at) return std::nullopt;
  const std::optional<uint64_t> name = reference(reader, oop + *name_at);
  if (!name) return std::nullopt;
  std::optional<std::string> text = string_value(reader, *name);
  if (!text || text->empty()) return std::nullopt;
  return JavaThreadName{tid, std::move(*text)};
}

std::vector<JavaThreadName> JavaThreadNames::read(RemoteReader& reader) {
  std::vector<JavaThreadName> out;
  if (!read_compression(reader)) return out;
  const std::optional<uint64_t> list = reader.word(l_.java_thread_list);
  if (!list || !*list) return out;
  const std::optional<uint32_t> length = reader.value<uint32_t>(*list + l_.threads_list_length);
  const std::optional<uint64_t> threads = reader.word(*list + l_.threads_list_threads);
  if (!length || *length > kMaxThreads || !threads || !*threads) return out;
  for (uint32_t i = 0; i < *length; ++i)
    if (std::optional<JavaThreadName> thread = thread_name(reader, *threads + 8 * uint64_t{i}))
      out.push_back(std::move(*thread));
  return out;
}

void keep_java_thread_name(std::string& kept, std::string read) {
  if (read == "DestroyJavaVM" && !kept.empty()) return;
  kept = std::move(read);
}

}  // namespace bpfprof::hotspot
