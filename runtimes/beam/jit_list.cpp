#include "runtimes/beam/jit_list.h"

#include <algorithm>
#include <cstring>
#include <vector>

namespace bpfprof {
namespace {

// debug_info's header: 1 for a code registration ({u64 base; u32 range_count; u32 code_size;
// u16 name_length; char name[]} from byte 8, its ranges from 32 + name_length on).
constexpr uint32_t kCodeRegistration = 1;
constexpr size_t kRecordHeader = 32;

template <typename T>
std::optional<T> field(std::span<const uint8_t> bytes, uint64_t at) {
  if (at > bytes.size() || bytes.size() - at < sizeof(T)) return std::nullopt;
  T value;
  memcpy(&value, bytes.data() + at, sizeof(T));
  return value;
}

// A name of `length` bytes at `at`, its NUL counted in the length.
std::optional<std::string_view> name_at(std::span<const uint8_t> bytes, uint64_t at,
                                        uint16_t length) {
  if (length == 0 || at > bytes.size() || bytes.size() - at < length) return std::nullopt;
  std::string_view name(reinterpret_cast<const char*>(bytes.data() + at), length);
  if (name.back() == '\0') name.remove_suffix(1);
  return name;
}

// A code registration's name.
std::optional<std::string_view> record_name(std::span<const uint8_t> record) {
  const auto header = field<uint32_t>(record, 0);
  const auto length = field<uint16_t>(record, 24);
  if (!header || *header != kCodeRegistration || !length) return std::nullopt;
  return name_at(record, 26, *length);
}

}  // namespace

std::optional<BeamCodeRange> jit_record_range(std::span<const uint8_t> record,
                                              std::string_view code, std::string_view range) {
  const auto base = field<uint64_t>(record, 8);
  const auto count = field<uint32_t>(record, 16);
  const auto name_length = field<uint16_t>(record, 24);
  if (!base || !count || !name_length || record_name(record) != code) return std::nullopt;
  uint64_t at = kRecordHeader + *name_length;
  for (uint32_t i = 0; i < *count; ++i) {
    const auto start = field<uint32_t>(record, at);
    const auto end = field<uint32_t>(record, at + 4);
    const auto lines = field<uint32_t>(record, at + 8);
    const auto length = field<uint16_t>(record, at + 12);
    if (!start || !end || !lines || !length) return std::nullopt;
    const std::optional<std::string_view> name = name_at(record, at + 14, *length);
    if (!name) return std::nullopt;
    if (*name == range && *start < *end) return BeamCodeRange{*base + *start, *base + *end};
    at += 16 + *length;
    for (uint32_t line = 0; line < *lines; ++line) {
      const auto file_length = field<uint16_t>(record, at + 8);
      if (!file_length) return std::nullopt;
      at += 12 + *file_length;
    }
  }
  return std::nullopt;
}

std::optional<BeamCodeRange> find_jit_range(RemoteReader& reader, uint64_t descriptor,
                                            std::string_view code, std::string_view range) {
  const std::optional<uint32_t> version = reader.value<uint32_t>(descriptor);
  std::optional<uint64_t> entry = reader.word(descriptor + 16);  // first_entry
  if (!version || *version != 1) return std::nullopt;
  std::vector<uint8_t> record;
  for (uint32_t i = 0; i < kMaxBeamJitEntries && entry && *entry; ++i) {
    uint64_t words[4];  // next, prev, symfile_addr, symfile_size
    if (!reader.read(*entry, words, sizeof(words))) return std::nullopt;
    if (words[3] >= kRecordHeader && words[3] <= kMaxBeamJitRecordBytes) {
      // The record's name first (most are modules'), then the whole record of the one named.
      record.resize(std::min<uint64_t>(words[3], kRecordHeader + code.size() + 1));
      if (reader.read(words[2], record.data(), record.size()) && record_name(record) == code) {
        record.resize(words[3]);
        if (reader.read(words[2], record.data(), record.size()))
          if (std::optional<BeamCodeRange> found = jit_record_range(record, code, range))
            return found;
      }
    }
    entry = words[0];
  }
  return std::nullopt;
}

}  // namespace bpfprof
