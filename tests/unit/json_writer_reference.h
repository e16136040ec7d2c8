// What the JSON writer's tests check its output against: a reference UTF-8 sanitizer and
// string escaper written independently of the writer's table-driven scanner, and a parser as
// strict as RFC 8259.
#pragma once

#include <cstdint>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_set>

#include "userspace/output/json_writer.h"

namespace bpfprof::json_test {

inline const std::string kReplacement = "\xEF\xBF\xBD";  // U+FFFD

template <typename WriteFn>
std::string to_json(WriteFn&& write) {
  StringSink sink;
  {
    JsonWriter writer(sink);
    write(writer);
    writer.flush();
  }
  return sink.take();
}

inline std::string json_string(std::string_view bytes) {
  return to_json([&](JsonWriter& w) { w.string(bytes); });
}

// ---- Reference UTF-8 sanitizer, written independently of the writer's table-driven
// scanner: complete sequences are checked by decode + canonical re-encode, and maximal
// invalid subparts by looking prefixes up in the set of every valid encoding's prefixes.

inline std::string encode_utf8(uint32_t cp) {
  std::string out;
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return out;
}

inline bool is_scalar_value(uint32_t cp) {
  return cp <= 0x10FFFF && !(cp >= 0xD800 && cp <= 0xDFFF);
}

inline bool is_complete_valid_sequence(std::string_view s) {
  auto b = [&](size_t i) { return static_cast<uint32_t>(static_cast<unsigned char>(s[i])); };
  uint32_t cp;
  switch (s.size()) {
    case 2:
      cp = (b(0) & 0x1F) << 6 | (b(1) & 0x3F);
      break;
    case 3:
      cp = (b(0) & 0x0F) << 12 | (b(1) & 0x3F) << 6 | (b(2) & 0x3F);
      break;
    case 4:
      cp = (b(0) & 0x07) << 18 | (b(1) & 0x3F) << 12 | (b(2) & 0x3F) << 6 | (b(3) & 0x3F);
      break;
    default:
      return false;
  }
  return is_scalar_value(cp) && encode_utf8(cp) == s;
}

inline uint32_t prefix_key(std::string_view s) {
  uint32_t key = static_cast<uint32_t>(s.size()) << 24;
  for (size_t i = 0; i < s.size(); ++i)
    key |= static_cast<uint32_t>(static_cast<unsigned char>(s[i])) << (8 * (2 - i));
  return key;
}

inline const std::unordered_set<uint32_t>& valid_proper_prefixes() {
  static const auto* prefixes = [] {
    auto* set = new std::unordered_set<uint32_t>;
    for (uint32_t cp = 0x80; cp <= 0x10FFFF; ++cp) {
      if (!is_scalar_value(cp)) continue;
      std::string e = encode_utf8(cp);
      for (size_t k = 1; k < e.size(); ++k)
        set->insert(prefix_key(std::string_view(e).substr(0, k)));
    }
    return set;
  }();
  return *prefixes;
}

inline std::string reference_sanitize(std::string_view in) {
  std::string out;
  size_t i = 0;
  while (i < in.size()) {
    if (static_cast<unsigned char>(in[i]) < 0x80) {
      out += in[i++];
      continue;
    }
    bool matched = false;
    for (size_t len = 2; len <= 4 && i + len <= in.size(); ++len) {
      if (is_complete_valid_sequence(in.substr(i, len))) {
        out += in.substr(i, len);
        i += len;
        matched = true;
        break;
      }
    }
    if (matched) continue;
    size_t subpart = 1;
    for (size_t k = 1; k <= 3 && i + k <= in.size(); ++k)
      if (valid_proper_prefixes().count(prefix_key(in.substr(i, k)))) subpart = k;
    out += kReplacement;
    i += subpart;
  }
  return out;
}

// The exact JSON text expected for a string of arbitrary bytes.
inline std::string reference_json_string(std::string_view bytes) {
  std::string valid = reference_sanitize(bytes);
  std::string out = "\"";
  for (size_t i = 0; i < valid.size(); ++i) {
    unsigned char c = valid[i];
    if (c == '"')
      out += "\\\"";
    else if (c == '\\')
      out += "\\\\";
    else if (c == '\n')
      out += "\\n";
    else if (c == '\r')
      out += "\\r";
    else if (c == '\t')
      out += "\\t";
    else if (c == '\b')
      out += "\\b";
    else if (c == '\f')
      out += "\\f";
    else if (c < 0x20) {
      char escape[8];
      std::snprintf(escape, sizeof escape, "\\u%04x", c);
      out += escape;
    } else if (valid.compare(i, 3, "\xE2\x80\xA8") == 0) {
      out += "\\u2028";
      i += 2;
    } else if (valid.compare(i, 3, "\xE2\x80\xA9") == 0) {
      out += "\\u2029";
      i += 2;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

// ---- Parsing the output ---------------------------------------------------------------
// nlohmann's parser follows RFC 8259 (grammar, UTF-8 and surrogate pairs in strings, nothing
// after the value) with two exceptions: it skips a leading UTF-8 byte order mark, and it takes a
// NUL byte for the end of the input, so "[1]\0junk" parses. RFC 8259 allows neither (a raw NUL
// is not whitespace, and inside a string it is an unescaped control character; section 8.1
// forbids adding a byte order mark), so both are refused before nlohmann sees the text.
inline void reject_what_nlohmann_tolerates(std::string_view text) {
  if (text.find('\0') != std::string_view::npos) throw std::runtime_error("raw NUL byte");
  if (text.starts_with("\xEF\xBB\xBF")) throw std::runtime_error("byte order mark");
}

inline nlohmann::json parse_strict(std::string_view text) {
  reject_what_nlohmann_tolerates(text);
  return nlohmann::json::parse(text);
}

}  // namespace bpfprof::json_test
