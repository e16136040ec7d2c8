#include "runtimes/php/names.h"

#include <algorithm>
#include <cstddef>
#include <vector>

namespace bpfprof {

namespace {

// zend_string's header: its gc refcount and type info (the type in the low 4 bits, GC_TYPE_MASK;
// flags above), hash, length.
struct PhpStringHeader {
  uint32_t refcount;
  uint32_t type_info;
  uint64_t hash;
  uint64_t length;
};
constexpr uint32_t kPhpTypeMask = 0xf;
constexpr uint32_t kPhpIsString = 6;  // IS_STRING

// Names and paths as PHP makes them hold no control characters: text that does is not a
// name, whatever the memory says.
bool plausible_php_text(const std::string& text) {
  return std::none_of(text.begin(), text.end(),
                      [](char c) { return static_cast<unsigned char>(c) < 0x20; });
}

}  // namespace

std::optional<std::string> read_php_string(RemoteReader& reader, const PhpLayout& layout,
                                           uint64_t address) {
  static_assert(sizeof(PhpStringHeader) == 24);
  if (!address || layout.string_length != offsetof(PhpStringHeader, length)) return std::nullopt;
  PhpStringHeader header;
  if (!reader.read(address, &header, sizeof(header)) ||
      (header.type_info & kPhpTypeMask) != kPhpIsString)
    return std::nullopt;
  const size_t kept = static_cast<size_t>(std::min<uint64_t>(header.length, kMaxPhpText));
  std::string text(kept, '\0');
  if (kept && !reader.read(address + layout.string_value, text.data(), kept)) return std::nullopt;
  if (!plausible_php_text(text)) return std::nullopt;
  if (header.length > kMaxPhpText) text += "\u2026";
  return text;
}

std::optional<RuntimeFunction> read_php_function(RemoteReader& reader, const PhpLayout& layout,
                                                 const bpfprof_php_frame& frame) {
  RuntimeFunction f{"", "", 0, RuntimeKind::kPhp};
  const bool user = frame.type != kPhpInternalFunction;
  if (user) {
    std::optional<std::string> filename = read_php_string(reader, layout, frame.filename);
    if (!filename) return std::nullopt;
    f.filename = std::move(*filename);
    f.first_line = frame.line_start;
  }
  if (frame.name) {
    std::optional<std::string> name = read_php_string(reader, layout, frame.name);
    if (!name) return std::nullopt;
    f.qualified_name = std::move(*name);
  } else if (frame.type == kPhpEvalCode) {
    f.qualified_name = "{eval}";
  } else {
    f.qualified_name = frame.call_info & kPhpCallTop ? "{main}" : "{include}";
  }
  if (frame.scope && frame.name) {
    const std::optional<uint64_t> class_name = reader.word(frame.scope + layout.class_name);
    const std::optional<std::string> scope =
        class_name ? read_php_string(reader, layout, *class_name) : std::nullopt;
    if (scope) f.qualified_name = *scope + "::" + f.qualified_name;
  }
  return f;
}

}  // namespace bpfprof
