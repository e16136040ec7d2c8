#include "userspace/output/json_writer.h"

#include <array>
#include <cassert>
#include <charconv>
#include <cmath>
#include <cstring>

namespace bpfprof {

namespace {

// Bytes that can be copied into a JSON string as they are: printable ASCII except the
// quote and the backslash. Bytes >= 0x80 need UTF-8 validation, the rest an escape.
constexpr std::array<bool, 256> kPlainAscii = [] {
  std::array<bool, 256> table{};
  for (int c = 0x20; c < 0x80; ++c) table[c] = c != '"' && c != '\\';
  return table;
}();

constexpr uint64_t kOnes = 0x0101010101010101ull;
constexpr uint64_t kHighBits = 0x8080808080808080ull;

constexpr uint64_t has_zero_byte(uint64_t x) { return (x - kOnes) & ~x & kHighBits; }

// True if none of the 8 bytes needs attention: all are printable ASCII, no '"' or '\\'.
bool all_plain_ascii(const unsigned char* p) {
  uint64_t x;
  std::memcpy(&x, p, sizeof x);
  uint64_t non_ascii = x & kHighBits;
  uint64_t control = (x - kOnes * 0x20) & ~x & kHighBits;  // some byte < 0x20
  uint64_t quote = has_zero_byte(x ^ (kOnes * '"'));
  uint64_t backslash = has_zero_byte(x ^ (kOnes * '\\'));
  return (non_ascii | control | quote | backslash) == 0;
}

struct Utf8Sequence {
  size_t length;  // bytes consumed: the whole sequence, or the maximal invalid subpart
  bool valid;
};

// Examines the sequence starting with a byte >= 0x80 (Unicode 15, table 3-7). An invalid
// one is cut short at the first byte that cannot continue it, and that byte is not
// consumed, so a following valid character survives.
Utf8Sequence scan_utf8(const unsigned char* p, size_t available) {
  unsigned char lead = p[0];
  size_t continuation_bytes;
  unsigned char low = 0x80, high = 0xBF;  // allowed range of the next byte
  if (lead >= 0xC2 && lead <= 0xDF) {
    continuation_bytes = 1;
  } else if (lead == 0xE0) {
    continuation_bytes = 2;
    low = 0xA0;  // below: overlong
  } else if (lead == 0xED) {
    continuation_bytes = 2;
    high = 0x9F;  // above: surrogates U+D800..DFFF
  } else if (lead >= 0xE1 && lead <= 0xEF) {
    continuation_bytes = 2;
  } else if (lead == 0xF0) {
    continuation_bytes = 3;
    low = 0x90;  // below: overlong
  } else if (lead >= 0xF1 && lead <= 0xF3) {
    continuation_bytes = 3;
  } else if (lead == 0xF4) {
    continuation_bytes = 3;
    high = 0x8F;  // above: > U+10FFFF
  } else {
    return {1, false};  // continuation byte, 0xC0/0xC1 (always overlong), 0xF5..0xFF
  }
  for (size_t i = 1; i <= continuation_bytes; ++i) {
    if (i >= available || p[i] < low || p[i] > high) return {i, false};
    low = 0x80;
    high = 0xBF;
  }
  return {continuation_bytes + 1, true};
}

constexpr std::string_view kReplacementCharacter = "\xEF\xBF\xBD";  // U+FFFD

}  // namespace

std::string to_valid_utf8(std::string_view s) {
  const auto* bytes = reinterpret_cast<const unsigned char*>(s.data());
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    if (bytes[i] < 0x80) {
      out.push_back(s[i++]);
      continue;
    }
    const Utf8Sequence sequence = scan_utf8(bytes + i, s.size() - i);
    if (sequence.valid)
      out.append(s.substr(i, sequence.length));
    else
      out.append(kReplacementCharacter);
    i += sequence.length;
  }
  return out;
}

JsonWriter::JsonWriter(OutputSink& sink) : sink_(sink) { buffer_.reserve(kFlushThreshold + 1024); }

JsonWriter::~JsonWriter() {
  try {
    flush();
  } catch (...) {
    // The sink remembers its failure and reports it again on commit().
  }
}

void JsonWriter::flush() {
  if (buffer_.empty()) return;
  sink_.write(buffer_);
  buffer_.clear();
}

void JsonWriter::before_value() {
  if (scopes_.empty()) {
    assert(!root_written_ && "JSON allows only one top-level value");
    root_written_ = true;
    return;
  }
  Scope& scope = scopes_.back();
  if (scope.is_object) {
    assert(expecting_value_after_key_ && "a value inside an object needs a key() first");
    expecting_value_after_key_ = false;
    return;
  }
  if (scope.has_members) buffer_.push_back(',');
  scope.has_members = true;
}

void JsonWriter::key(std::string_view name) {
  assert(!scopes_.empty() && scopes_.back().is_object && "key() outside an object");
  assert(!expecting_value_after_key_ && "key() twice without a value");
  if (!scopes_.empty()) {
    Scope& scope = scopes_.back();
    if (scope.has_members) buffer_.push_back(',');
    scope.has_members = true;
  }
  write_quoted(name);
  buffer_.push_back(':');
  expecting_value_after_key_ = true;
}

void JsonWriter::open_scope(bool is_object, char bracket) {
  before_value();
  buffer_.push_back(bracket);
  scopes_.push_back({is_object, false});
}

void JsonWriter::close_scope([[maybe_unused]] bool is_object, char bracket) {
  assert(!scopes_.empty() && "end_object()/end_array() without a matching begin");
  assert((scopes_.empty() || scopes_.back().is_object == is_object) &&
         "end_object() closing an array or end_array() closing an object");
  assert(!expecting_value_after_key_ && "object closed after a key() without its value");
  if (scopes_.empty()) return;
  scopes_.pop_back();
  buffer_.push_back(bracket);
  maybe_flush();
}

void JsonWriter::begin_object() { open_scope(true, '{'); }
void JsonWriter::end_object() { close_scope(true, '}'); }
void JsonWriter::begin_array() { open_scope(false, '['); }
void JsonWriter::end_array() { close_scope(false, ']'); }

void JsonWriter::string(std::string_view s) {
  before_value();
  write_quoted(s);
  maybe_flush();
}

void JsonWriter::number(std::int64_t v) {
  before_value();
  char text[24];
  auto result = std::to_chars(text, text + sizeof text, v);
  append({text, result.ptr});
  maybe_flush();
}

void JsonWriter::number(std::uint64_t v) {
  before_value();
  char text[24];
  auto result = std::to_chars(text, text + sizeof text, v);
  append({text, result.ptr});
  maybe_flush();
}

void JsonWriter::number(double v) {
  if (!std::isfinite(v)) return null();
  before_value();
  char text[32];  // the longest shortest form, "-2.2250738585072014e-308", is 24
  auto result = std::to_chars(text, text + sizeof text, v);
  append({text, result.ptr});
  maybe_flush();
}

void JsonWriter::number(float v) {
  if (!std::isfinite(v)) return null();
  before_value();
  char text[32];
  auto result = std::to_chars(text, text + sizeof text, v);
  append({text, result.ptr});
  maybe_flush();
}

void JsonWriter::boolean(bool b) {
  before_value();
  append(b ? "true" : "false");
  maybe_flush();
}

void JsonWriter::null() {
  before_value();
  append("null");
  maybe_flush();
}

namespace {

// The JSON escape of an ASCII character that cannot appear as it is; `buffer` holds it when
// it is a \u escape.
std::string_view ascii_escape(unsigned char c, char (&buffer)[6]) {
  switch (c) {
    case '"':
      return "\\\"";
    case '\\':
      return "\\\\";
    case '\b':
      return "\\b";
    case '\f':
      return "\\f";
    case '\n':
      return "\\n";
    case '\r':
      return "\\r";
    case '\t':
      return "\\t";
    default: {
      static constexpr char kHex[] = "0123456789abcdef";
      buffer[0] = '\\';
      buffer[1] = 'u';
      buffer[2] = '0';
      buffer[3] = '0';
      buffer[4] = kHex[c >> 4];
      buffer[5] = kHex[c & 0xF];
      return {buffer, sizeof buffer};
    }
  }
}

}  // namespace

void JsonWriter::write_quoted(std::string_view s) {
  const auto* bytes = reinterpret_cast<const unsigned char*>(s.data());
  const size_t size = s.size();
  buffer_.push_back('"');
  // Bytes from run_start to i are copied verbatim, in one append, when something that needs
  // rewriting turns up (or at the end).
  size_t run_start = 0;
  size_t i = 0;
  auto end_run_at_i = [&] { buffer_.append(s.data() + run_start, i - run_start); };
  while (i < size) {
    if (i + 8 <= size && all_plain_ascii(bytes + i)) {
      i += 8;
      continue;
    }
    unsigned char c = bytes[i];
    if (kPlainAscii[c]) {
      ++i;
      continue;
    }
    if (c < 0x80) {
      end_run_at_i();
      char buffer[6];
      append(ascii_escape(c, buffer));
      run_start = ++i;
      continue;
    }
    Utf8Sequence sequence = scan_utf8(bytes + i, size - i);
    if (!sequence.valid) {
      end_run_at_i();
      append(kReplacementCharacter);
      i += sequence.length;
      run_start = i;
      continue;
    }
    // U+2028/U+2029 are legal in JSON but end lines in older JavaScript.
    if (sequence.length == 3 && c == 0xE2 && bytes[i + 1] == 0x80 &&
        (bytes[i + 2] == 0xA8 || bytes[i + 2] == 0xA9)) {
      end_run_at_i();
      append(bytes[i + 2] == 0xA8 ? "\\u2028" : "\\u2029");
      i += 3;
      run_start = i;
      continue;
    }
    i += sequence.length;
  }
  end_run_at_i();
  buffer_.push_back('"');
}

}  // namespace bpfprof
