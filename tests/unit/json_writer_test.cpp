#include "userspace/output/json_writer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

namespace bpfprof {
namespace {

const std::string kReplacement = "\xEF\xBF\xBD";  // U+FFFD

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

std::string json_string(std::string_view bytes) {
  return to_json([&](JsonWriter& w) { w.string(bytes); });
}

// ---- Reference UTF-8 sanitizer, written independently of the writer's table-driven
// scanner: complete sequences are checked by decode + canonical re-encode, and maximal
// invalid subparts by looking prefixes up in the set of every valid encoding's prefixes.

std::string encode_utf8(uint32_t cp) {
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

bool is_scalar_value(uint32_t cp) { return cp <= 0x10FFFF && !(cp >= 0xD800 && cp <= 0xDFFF); }

bool is_complete_valid_sequence(std::string_view s) {
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

uint32_t prefix_key(std::string_view s) {
  uint32_t key = static_cast<uint32_t>(s.size()) << 24;
  for (size_t i = 0; i < s.size(); ++i)
    key |= static_cast<uint32_t>(static_cast<unsigned char>(s[i])) << (8 * (2 - i));
  return key;
}

const std::unordered_set<uint32_t>& valid_proper_prefixes() {
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

std::string reference_sanitize(std::string_view in) {
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
std::string reference_json_string(std::string_view bytes) {
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
void reject_what_nlohmann_tolerates(std::string_view text) {
  if (text.find('\0') != std::string_view::npos) throw std::runtime_error("raw NUL byte");
  if (text.starts_with("\xEF\xBB\xBF")) throw std::runtime_error("byte order mark");
}

nlohmann::json parse_strict(std::string_view text) {
  reject_what_nlohmann_tolerates(text);
  return nlohmann::json::parse(text);
}

// ---- Escaping -------------------------------------------------------------------------

TEST(JsonWriterEscaping, EveryControlCharacter) {
  for (int c = 0; c < 0x20; ++c) {
    std::string expected;
    switch (c) {
      case '\b':
        expected = "\\b";
        break;
      case '\t':
        expected = "\\t";
        break;
      case '\n':
        expected = "\\n";
        break;
      case '\f':
        expected = "\\f";
        break;
      case '\r':
        expected = "\\r";
        break;
      default: {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\u%04x", c);
        expected = buf;
      }
    }
    std::string input = "a";
    input += static_cast<char>(c);
    input += "b";
    EXPECT_EQ(json_string(input), "\"a" + expected + "b\"") << "control character " << c;
    EXPECT_EQ(json_string(std::string(1, static_cast<char>(c))), "\"" + expected + "\"") << c;
  }
}

TEST(JsonWriterEscaping, EmbeddedNulIsEscapedNotTruncating) {
  EXPECT_EQ(json_string(std::string_view("x\0y", 3)), "\"x\\u0000y\"");
}

TEST(JsonWriterEscaping, QuoteBackslashAndPlainAscii) {
  EXPECT_EQ(json_string("say \"hi\""), "\"say \\\"hi\\\"\"");
  EXPECT_EQ(json_string("C:\\dir\\"), "\"C:\\\\dir\\\\\"");
  EXPECT_EQ(json_string("\\\""), "\"\\\\\\\"\"");
  EXPECT_EQ(json_string("/usr/lib"), "\"/usr/lib\"");  // no need to escape '/'
  EXPECT_EQ(json_string("\x7F"), "\"\x7F\"");          // DEL is legal in JSON
  EXPECT_EQ(json_string(""), "\"\"");
  std::string printable;
  for (int c = 0x20; c < 0x7F; ++c) printable += static_cast<char>(c);
  EXPECT_EQ(json_string(printable), reference_json_string(printable));
}

TEST(JsonWriterEscaping, SpecialByteAtEveryPositionOfTheWordScan) {
  // The writer scans 8 bytes at a time; put each kind of special byte at every offset
  // relative to those words, and check the bytes around it survive.
  const std::vector<std::string> specials = {
      "\"",       "\\",           "\n",   std::string(1, '\0'), "\x1F", "\x80",
      "\xC3\xA9", "\xE2\x80\xA8", "\xFF", "\xF0\x9F\x98\x80"};
  for (const auto& special : specials) {
    for (size_t before = 0; before < 20; ++before) {
      for (size_t after : {0, 1, 7, 8, 9, 16}) {
        std::string input = std::string(before, 'a') + special + std::string(after, 'z');
        EXPECT_EQ(json_string(input), reference_json_string(input)) << before << "/" << after;
      }
    }
  }
}

TEST(JsonWriterEscaping, ViewsIntoLargerBuffersStopAtTheirEnd) {
  // string_views are not NUL-terminated: bytes right after the view must never be read
  // into the output, whether they are plain ASCII or the tail of a multibyte character.
  const std::string backing =
      "abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJ\xC3\xA9\xE4\xB8\xAD\"\\\nKLMNOPQRSTUVWXYZ";
  for (size_t start = 0; start < backing.size(); ++start) {
    for (size_t length = 0; start + length <= backing.size(); ++length) {
      std::string_view view = std::string_view(backing).substr(start, length);
      EXPECT_EQ(json_string(view), reference_json_string(std::string(view)))
          << start << "+" << length;
    }
  }
}

TEST(JsonWriterUtf8, ValidMultibytePassesThroughUnchanged) {
  for (std::string s : {"é", "中", "😀", "naïve 中文 😀 text", "\xEF\xBF\xBD"}) {
    EXPECT_EQ(json_string(s), "\"" + s + "\"");
  }
  // Boundaries of each encoding length and around the surrogate gap.
  for (uint32_t cp : {0x80u, 0x7FFu, 0x800u, 0xD7FFu, 0xE000u, 0xFFFDu, 0xFFFFu, 0x10000u,
                      0x10FFFFu, 0x2027u, 0x202Au}) {
    std::string s = encode_utf8(cp);
    EXPECT_EQ(json_string(s), "\"" + s + "\"") << std::hex << cp;
  }
}

TEST(JsonWriterUtf8, LineAndParagraphSeparatorsAreEscaped) {
  EXPECT_EQ(json_string("\xE2\x80\xA8"), "\"\\u2028\"");
  EXPECT_EQ(json_string("x\xE2\x80\xA9y"), "\"x\\u2029y\"");
  EXPECT_EQ(json_string("\xE2\x80\xA8\xE2\x80\xA9"), "\"\\u2028\\u2029\"");
}

struct InvalidCase {
  const char* what;
  std::string input;
  std::string expected;  // R stands for U+FFFD
};

std::string with_replacements(std::string_view pattern) {
  std::string out;
  for (char c : pattern) out += c == 'R' ? kReplacement : std::string(1, c);
  return out;
}

TEST(JsonWriterUtf8, InvalidSequencesBecomeReplacementCharacters) {
  const std::vector<InvalidCase> cases = {
      {"stray continuation", "\x80", "R"},
      {"stray continuation inside text",
       "a\x80"
       "b",
       "aRb"},
      {"two stray continuations", "\x80\xBF", "RR"},
      {"C0 lead (always overlong)", "\xC0\xAF", "RR"},
      {"C1 lead (always overlong)", "\xC1\xBF", "RR"},
      {"overlong 3-byte", "\xE0\x80\xAF", "RRR"},
      {"overlong 3-byte, top", "\xE0\x9F\xBF", "RRR"},
      {"overlong 4-byte", "\xF0\x80\x80\xAF", "RRRR"},
      {"overlong 4-byte, top", "\xF0\x8F\xBF\xBF", "RRRR"},
      {"high surrogate", "\xED\xA0\x80", "RRR"},
      {"low surrogate", "\xED\xBF\xBF", "RRR"},
      {"CESU-8 surrogate pair", "\xED\xA0\xBD\xED\xB8\x80", "RRRRRR"},
      {"above U+10FFFF", "\xF4\x90\x80\x80", "RRRR"},
      {"F5 lead", "\xF5\x80\x80\x80", "RRRR"},
      {"F7 lead", "\xF7\xBF\xBF\xBF", "RRRR"},
      {"5-byte form", "\xF8\x88\x80\x80\x80", "RRRRR"},
      {"6-byte form", "\xFC\x84\x80\x80\x80\x80", "RRRRRR"},
      {"FE", "\xFE", "R"},
      {"FF", "\xFF", "R"},
      {"lead then ASCII",
       "\xC3"
       "A",
       "RA"},
      {"lead then quote", "\xC3\"", "R\\\""},
      {"lead then newline", "\xC3\n", "R\\n"},
      {"lead then valid 2-byte", "\xC3\xC3\xA9", "R\xC3\xA9"},
      {"truncated 3-byte then ASCII",
       "\xE4\xB8"
       "A",
       "RA"},
      {"truncated 3-byte then euro", "\xE2\x82\xE2\x82\xAC", "R\xE2\x82\xAC"},
      {"truncated 4-byte then valid 2-byte", "\xF0\x9F\x98\xC3\xA9", "R\xC3\xA9"},
      {"truncated 4-byte then emoji", "\xF0\x9F\xF0\x9F\x98\x80", "R\xF0\x9F\x98\x80"},
      {"surrogate lead then valid", "\xED\xA0\xC3\xA9", "RR\xC3\xA9"},
      // The example of Unicode 15 section 3.9, "U+FFFD Substitution of Maximal Subparts".
      {"Unicode example", "\x61\xF1\x80\x80\xE1\x80\xC2\x62\x80\x63\x80\xBF\x64", "aRRRbRcRRd"},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(json_string(c.input), "\"" + with_replacements(c.expected) + "\"") << c.what;
    EXPECT_EQ(reference_json_string(c.input), "\"" + with_replacements(c.expected) + "\"")
        << "reference disagrees: " << c.what;
  }
}

TEST(JsonWriterUtf8, TruncatedSequenceAtEndOfString) {
  EXPECT_EQ(json_string("\xC3"), "\"" + kReplacement + "\"");
  EXPECT_EQ(json_string("\xE4\xB8"), "\"" + kReplacement + "\"");
  EXPECT_EQ(json_string("\xF0\x9F\x98"), "\"" + kReplacement + "\"");
  EXPECT_EQ(json_string("abc\xF0\x9F"), "\"abc" + kReplacement + "\"");
  EXPECT_EQ(json_string("\xE0"), "\"" + kReplacement + "\"");
  // Truncated right before the closing quote must not swallow it or the next value.
  EXPECT_EQ(to_json([](JsonWriter& w) {
              w.begin_array();
              w.string("x\xE4");
              w.string("y");
              w.end_array();
            }),
            "[\"x" + kReplacement + "\",\"y\"]");
}

TEST(JsonWriterUtf8, AllShortByteStringsMatchReference) {
  // Every 1- and 2-byte string, and 3-/4-byte strings starting with a multibyte lead with
  // every second byte and interesting later bytes: compared byte-for-byte with the reference.
  std::vector<std::string> inputs;
  for (int a = 0; a < 256; ++a) {
    inputs.push_back(std::string(1, static_cast<char>(a)));
    for (int b = 0; b < 256; ++b) inputs.push_back({static_cast<char>(a), static_cast<char>(b)});
  }
  const unsigned char interesting[] = {0x00, 0x22, 0x41, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0,
                                       0xA8, 0xBF, 0xC0, 0xC2, 0xE0, 0xED, 0xF4, 0xFF};
  for (int a = 0xE0; a <= 0xF7; ++a) {
    for (int b = 0; b < 256; ++b) {
      for (unsigned char c : interesting) {
        inputs.push_back({static_cast<char>(a), static_cast<char>(b), static_cast<char>(c)});
        if (a >= 0xF0)
          for (unsigned char d : interesting)
            inputs.push_back({static_cast<char>(a), static_cast<char>(b), static_cast<char>(c),
                              static_cast<char>(d)});
      }
    }
  }
  std::string output = to_json([&](JsonWriter& w) {
    w.begin_array();
    for (const auto& s : inputs) w.string(s);
    w.end_array();
  });
  std::string expected = "[";
  for (size_t i = 0; i < inputs.size(); ++i)
    expected += (i ? "," : "") + reference_json_string(inputs[i]);
  expected += "]";
  ASSERT_EQ(output.size(), expected.size());
  if (output != expected) {
    size_t at =
        std::mismatch(output.begin(), output.end(), expected.begin()).first - output.begin();
    FAIL() << "first difference at byte " << at << ": ..."
           << output.substr(at > 40 ? at - 40 : 0, 80);
  }
  EXPECT_NO_THROW(parse_strict(output));
}

TEST(JsonWriterUtf8, KeysAreEscapedAndSanitizedToo) {
  EXPECT_EQ(to_json([](JsonWriter& w) {
              w.begin_object();
              w.key("a\"b\n\xFF");
              w.null();
              w.end_object();
            }),
            "{\"a\\\"b\\n" + kReplacement + "\":null}");
}

// ---- Structure ------------------------------------------------------------------------

TEST(JsonWriterStructure, NestedContainersGetCommasRight) {
  std::string out = to_json([](JsonWriter& w) {
    w.begin_object();
    w.key("a");
    w.begin_array();
    w.number(1);
    w.begin_array();
    w.end_array();
    w.begin_object();
    w.end_object();
    w.begin_array();
    w.number(2);
    w.number(3);
    w.end_array();
    w.begin_object();
    w.key("b");
    w.null();
    w.end_object();
    w.end_array();
    w.key("c");
    w.begin_object();
    w.field("d", true);
    w.field("e", false);
    w.end_object();
    w.field("f", "x");
    w.key("g");
    w.begin_array();
    w.begin_array();
    w.begin_array();
    w.end_array();
    w.end_array();
    w.begin_array();
    w.end_array();
    w.end_array();
    w.end_object();
  });
  EXPECT_EQ(out,
            R"({"a":[1,[],{},[2,3],{"b":null}],"c":{"d":true,"e":false},"f":"x","g":[[[]],[]]})");
  EXPECT_NO_THROW(parse_strict(out));
}

TEST(JsonWriterStructure, TopLevelScalarsAndEmptyContainers) {
  EXPECT_EQ(to_json([](JsonWriter& w) {
              w.begin_object();
              w.end_object();
            }),
            "{}");
  EXPECT_EQ(to_json([](JsonWriter& w) {
              w.begin_array();
              w.end_array();
            }),
            "[]");
  EXPECT_EQ(to_json([](JsonWriter& w) { w.null(); }), "null");
  EXPECT_EQ(to_json([](JsonWriter& w) { w.boolean(true); }), "true");
  EXPECT_EQ(to_json([](JsonWriter& w) { w.number(7); }), "7");
}

TEST(JsonWriterStructure, CompleteTracksTheDocument) {
  StringSink sink;
  JsonWriter w(sink);
  EXPECT_FALSE(w.complete());
  w.begin_array();
  EXPECT_FALSE(w.complete());
  EXPECT_EQ(w.depth(), 1u);
  w.begin_object();
  EXPECT_EQ(w.depth(), 2u);
  w.end_object();
  w.end_array();
  EXPECT_TRUE(w.complete());
  EXPECT_EQ(w.depth(), 0u);
}

TEST(JsonWriterStructure, FieldOverloadsPickTheRightType) {
  std::string owned = "own";
  std::string_view view = "view";
  const char* pointer = "ptr";
  std::string out = to_json([&](JsonWriter& w) {
    w.begin_object();
    w.field("literal", "lit");  // must be a string, not a pointer converted to true
    w.field("pointer", pointer);
    w.field("string", owned);
    w.field("view", view);
    w.field("bool", false);
    w.field("int", 42);
    w.field("negative_short", static_cast<short>(-3));
    w.field("uint8", static_cast<uint8_t>(255));
    w.field("unsigned", 7u);
    w.field("size", size_t{1} << 40);
    w.field("double", 2.5);
    w.field("float", 0.1f);
    w.field("null", nullptr);
    w.end_object();
  });
  EXPECT_EQ(out, R"({"literal":"lit","pointer":"ptr","string":"own","view":"view","bool":false,)"
                 R"("int":42,"negative_short":-3,"uint8":255,"unsigned":7,"size":1099511627776,)"
                 R"("double":2.5,"float":0.1,"null":null})");
}

// ---- Numbers --------------------------------------------------------------------------

std::string number_json(auto v) {
  return to_json([&](JsonWriter& w) { w.number(v); });
}

TEST(JsonWriterNumbers, Integers) {
  EXPECT_EQ(number_json(std::numeric_limits<int64_t>::min()), "-9223372036854775808");
  EXPECT_EQ(number_json(std::numeric_limits<int64_t>::max()), "9223372036854775807");
  EXPECT_EQ(number_json(std::numeric_limits<uint64_t>::max()), "18446744073709551615");
  EXPECT_EQ(number_json(int64_t{0}), "0");
  EXPECT_EQ(number_json(int64_t{-1}), "-1");
  EXPECT_EQ(number_json(std::numeric_limits<int32_t>::min()), "-2147483648");
  EXPECT_EQ(number_json(std::numeric_limits<uint32_t>::max()), "4294967295");
}

TEST(JsonWriterNumbers, DoublesUseShortestRoundTripForm) {
  EXPECT_EQ(number_json(0.1), "0.1");
  EXPECT_EQ(number_json(12.5), "12.5");
  EXPECT_EQ(number_json(1e300), "1e+300");
  EXPECT_EQ(number_json(-0.0), "-0");
  EXPECT_EQ(number_json(0.0), "0");
  EXPECT_EQ(number_json(1.0), "1");
  EXPECT_EQ(number_json(0.1 + 0.2), "0.30000000000000004");
  EXPECT_EQ(number_json(5e-324), "5e-324");
  EXPECT_EQ(number_json(DBL_MAX), "1.7976931348623157e+308");
  EXPECT_EQ(number_json(-DBL_MIN), "-2.2250738585072014e-308");
  EXPECT_EQ(number_json(0.1f), "0.1");
}

TEST(JsonWriterNumbers, NonFiniteBecomesNull) {
  EXPECT_EQ(number_json(std::numeric_limits<double>::quiet_NaN()), "null");
  EXPECT_EQ(number_json(-std::numeric_limits<double>::quiet_NaN()), "null");
  EXPECT_EQ(number_json(std::numeric_limits<double>::infinity()), "null");
  EXPECT_EQ(number_json(-std::numeric_limits<double>::infinity()), "null");
  EXPECT_EQ(number_json(std::numeric_limits<float>::infinity()), "null");
  // And commas stay right around the substituted null.
  EXPECT_EQ(to_json([](JsonWriter& w) {
              w.begin_array();
              w.number(1.5);
              w.number(std::nan(""));
              w.number(2.5);
              w.end_array();
            }),
            "[1.5,null,2.5]");
}

TEST(JsonWriterNumbers, RandomDoublesRoundTripExactly) {
  std::mt19937_64 rng(12345);
  for (int i = 0; i < 20000; ++i) {
    uint64_t bits = rng();
    double v;
    std::memcpy(&v, &bits, sizeof v);
    std::string text = number_json(v);
    if (!std::isfinite(v)) {
      EXPECT_EQ(text, "null");
      continue;
    }
    nlohmann::json parsed;
    ASSERT_NO_THROW(parsed = parse_strict(text)) << text;
    ASSERT_TRUE(parsed.is_number()) << text;
    double back = std::strtod(text.c_str(), nullptr);
    uint64_t back_bits;
    std::memcpy(&back_bits, &back, sizeof back);
    ASSERT_EQ(back_bits, bits) << text;
  }
}

// ---- Buffering ------------------------------------------------------------------------

class ChunkRecordingSink : public OutputSink {
 public:
  void write(std::string_view data) override {
    chunks.push_back(data.size());
    all.append(data);
  }
  std::vector<size_t> chunks;
  std::string all;
};

TEST(JsonWriterBuffering, FlushesInBoundedChunks) {
  ChunkRecordingSink sink;
  std::string expected = "[";
  {
    JsonWriter w(sink);
    w.begin_array();
    for (int i = 0; i < 100000; ++i) {
      w.string("item");
      w.number(i);
      expected += (i ? ",\"item\"," : "\"item\",") + std::to_string(i);
    }
    w.end_array();
    expected += "]";
    EXPECT_GT(sink.chunks.size(), 5u) << "should stream, not hold the whole document";
    for (size_t chunk : sink.chunks) EXPECT_LT(chunk, JsonWriter::kFlushThreshold + 64);
  }
  EXPECT_EQ(sink.all, expected);  // destructor flushed the tail
}

TEST(JsonWriterBuffering, SmallOutputWaitsForFlushOrDestructor) {
  ChunkRecordingSink sink;
  {
    JsonWriter w(sink);
    w.begin_array();
    w.number(1);
    w.end_array();
    EXPECT_TRUE(sink.all.empty());
  }
  EXPECT_EQ(sink.all, "[1]");
}

TEST(JsonWriterBuffering, DestructorSwallowsSinkErrors) {
  class FailingSink : public OutputSink {
   public:
    void write(std::string_view) override { throw std::runtime_error("disk full"); }
  } sink;
  {
    JsonWriter w(sink);
    w.null();
    EXPECT_THROW(w.flush(), std::runtime_error);
  }  // must not terminate
}

TEST(JsonWriterBuffering, HugeStringIsWrittenCompletely) {
  std::string big(3 * 1024 * 1024, 'x');
  for (size_t i = 0; i < big.size(); i += 1000) big[i] = '\n';
  EXPECT_EQ(json_string(big), reference_json_string(big));
}

// ---- Misuse ---------------------------------------------------------------------------

TEST(JsonWriterMisuseDeathTest, AssertsInDebugBuilds) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  auto misuse = [](auto fn) {
    StringSink sink;
    JsonWriter w(sink);
    fn(w);
  };
  EXPECT_DEBUG_DEATH(misuse([](JsonWriter& w) { w.end_object(); }), "without a matching begin");
  EXPECT_DEBUG_DEATH(misuse([](JsonWriter& w) {
                       w.begin_array();
                       w.end_object();
                     }),
                     "closing an array");
  EXPECT_DEBUG_DEATH(misuse([](JsonWriter& w) {
                       w.begin_object();
                       w.number(1);
                     }),
                     "needs a key");
  EXPECT_DEBUG_DEATH(misuse([](JsonWriter& w) {
                       w.begin_array();
                       w.key("k");
                     }),
                     "outside an object");
  EXPECT_DEBUG_DEATH(misuse([](JsonWriter& w) {
                       w.begin_object();
                       w.key("a");
                       w.key("b");
                     }),
                     "twice");
  EXPECT_DEBUG_DEATH(misuse([](JsonWriter& w) {
                       w.begin_object();
                       w.key("a");
                       w.end_object();
                     }),
                     "without its value");
  EXPECT_DEBUG_DEATH(misuse([](JsonWriter& w) {
                       w.null();
                       w.null();
                     }),
                     "one top-level value");
}

// ---- Random documents -----------------------------------------------------------------

// One step of a document, in order, as nlohmann's SAX parser reports it. A parsed tree would
// not do: random keys repeat within an object (empty ones, and different bytes that sanitize
// to the same text), and nlohmann::json keeps only the last of them and sorts the members.
struct Event {
  enum class Kind { Null, Bool, Number, String, Key, BeginArray, EndArray, BeginObject, EndObject };
  Kind kind = Kind::Null;
  bool boolean = false;
  std::string text;           // number as written, or decoded string or key
  std::optional<double> dbl;  // expected only: a finite double, compared by value bits

  static Event of(Kind kind, std::string text = {}) {
    Event e;
    e.kind = kind;
    e.text = std::move(text);
    return e;
  }
};

// Numbers are kept as written. nlohmann passes the text of floats on; an integer token (no
// fraction, no exponent) is canonical under the strict grammar, so its value gives the text
// back, except that "-0" is the only token that comes back as number_integer 0.
class EventRecorder : public nlohmann::json_sax<nlohmann::json> {
 public:
  std::vector<Event> events;

  bool null() override { return add(Event::Kind::Null); }
  bool boolean(bool b) override {
    events.push_back(Event::of(Event::Kind::Bool));
    events.back().boolean = b;
    return true;
  }
  bool number_integer(number_integer_t v) override {
    return add(Event::Kind::Number, v == 0 ? "-0" : std::to_string(v));
  }
  bool number_unsigned(number_unsigned_t v) override {
    return add(Event::Kind::Number, std::to_string(v));
  }
  bool number_float(number_float_t, const string_t& text) override {
    return add(Event::Kind::Number, text);
  }
  bool string(string_t& s) override { return add(Event::Kind::String, s); }
  bool binary(binary_t&) override { throw std::runtime_error("binary value in JSON text"); }
  bool start_object(std::size_t) override { return add(Event::Kind::BeginObject); }
  bool key(string_t& s) override { return add(Event::Kind::Key, s); }
  bool end_object() override { return add(Event::Kind::EndObject); }
  bool start_array(std::size_t) override { return add(Event::Kind::BeginArray); }
  bool end_array() override { return add(Event::Kind::EndArray); }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
    throw std::runtime_error(e.what());
  }

 private:
  bool add(Event::Kind kind, std::string text = {}) {
    events.push_back(Event::of(kind, std::move(text)));
    return true;
  }
};

std::vector<Event> parse_events(std::string_view text) {
  reject_what_nlohmann_tolerates(text);
  EventRecorder recorder;
  nlohmann::json::sax_parse(text, &recorder);
  return std::move(recorder.events);
}

class RandomDocument {
 public:
  explicit RandomDocument(uint64_t seed) : rng_(seed) {}

  std::string random_bytes() {
    size_t len = std::uniform_int_distribution<size_t>(0, chance(5) ? 300 : 24)(rng_);
    std::string s;
    int flavour = std::uniform_int_distribution<int>(0, 3)(rng_);
    while (s.size() < len) {
      switch (flavour) {
        case 0:  // arbitrary bytes
          s += static_cast<char>(rng_());
          break;
        case 1:  // mostly ASCII with the odd special
          s += chance(10) ? static_cast<char>(rng_()) : static_cast<char>(0x20 + rng_() % 0x5F);
          break;
        case 2: {  // valid UTF-8 from random scalar values, sometimes chopped
          uint32_t cp;
          do cp = static_cast<uint32_t>(rng_() % 0x110000);
          while (!is_scalar_value(cp));
          if (chance(4)) cp = cp % 0x800;
          std::string e = encode_utf8(cp);
          if (chance(20)) e.pop_back();
          s += e;
          break;
        }
        default: {  // bytes that stress the decoder
          static const unsigned char tricky[] = {
              0x80, 0xBF, 0xC0, 0xC1, 0xC2, 0xDF, 0xE0, 0xE2, 0xED, 0xEF, 0xF0, 0xF4, 0xF5,
              0xFF, 0xA0, 0x9F, 0x8F, 0x90, 0xA8, 0xA9, '"',  '\\', 0x00, 0x1F, 'a'};
          s += static_cast<char>(tricky[rng_() % sizeof tricky]);
        }
      }
    }
    return s;
  }

  // Writes one random value and appends the events a parser must report for it.
  void write_value(JsonWriter& w, int depth, std::vector<Event>& expected) {
    Event e;
    int choice = std::uniform_int_distribution<int>(0, depth >= 6 ? 5 : 7)(rng_);
    switch (choice) {
      case 0: {
        std::string s = random_bytes();
        w.string(s);
        e.kind = Event::Kind::String;
        e.text = reference_sanitize(s);
        break;
      }
      case 1: {
        int64_t v = static_cast<int64_t>(rng_()) >> (rng_() % 64);
        w.number(v);
        e.kind = Event::Kind::Number;
        e.text = std::to_string(v);
        break;
      }
      case 2: {
        uint64_t v = rng_() >> (rng_() % 64);
        w.number(v);
        e.kind = Event::Kind::Number;
        e.text = std::to_string(v);
        break;
      }
      case 3: {
        double v;
        if (chance(2)) {
          uint64_t bits = rng_();
          std::memcpy(&v, &bits, sizeof v);
        } else {
          v = std::uniform_real_distribution<double>(-1e6, 1e6)(rng_);
        }
        w.number(v);
        if (std::isfinite(v)) {
          e.kind = Event::Kind::Number;
          e.dbl = v;
        }
        break;
      }
      case 4: {
        bool b = chance(2);
        w.boolean(b);
        e.kind = Event::Kind::Bool;
        e.boolean = b;
        break;
      }
      case 5:
        w.null();
        break;
      case 6: {
        expected.push_back(Event::of(Event::Kind::BeginArray));
        w.begin_array();
        int n = std::uniform_int_distribution<int>(0, 12)(rng_);
        for (int i = 0; i < n; ++i) write_value(w, depth + 1, expected);
        w.end_array();
        e.kind = Event::Kind::EndArray;
        break;
      }
      default: {
        expected.push_back(Event::of(Event::Kind::BeginObject));
        w.begin_object();
        int n = std::uniform_int_distribution<int>(0, 12)(rng_);
        for (int i = 0; i < n; ++i) {
          std::string name = random_bytes();
          w.key(name);
          expected.push_back(Event::of(Event::Kind::Key, reference_sanitize(name)));
          write_value(w, depth + 1, expected);
        }
        w.end_object();
        e.kind = Event::Kind::EndObject;
      }
    }
    expected.push_back(std::move(e));
  }

 private:
  bool chance(int one_in) { return rng_() % one_in == 0; }
  std::mt19937_64 rng_;
};

// Stops at the first difference: after a lost or extra event every later one differs too.
void expect_same_events(const std::vector<Event>& expected, const std::vector<Event>& actual) {
  for (size_t i = 0; i < std::min(expected.size(), actual.size()); ++i) {
    const Event& e = expected[i];
    const Event& a = actual[i];
    ASSERT_EQ(static_cast<int>(e.kind), static_cast<int>(a.kind)) << "event " << i;
    ASSERT_EQ(e.boolean, a.boolean) << "event " << i;
    if (e.dbl) {
      double back = std::strtod(a.text.c_str(), nullptr);
      ASSERT_EQ(std::memcmp(&back, &*e.dbl, sizeof back), 0) << "event " << i << " " << a.text;
    } else {
      ASSERT_EQ(e.text, a.text) << "event " << i;
    }
  }
  ASSERT_EQ(expected.size(), actual.size());
}

bool python_available() { return std::system("python3 -c 'pass' >/dev/null 2>&1") == 0; }

std::string write_temp_file(const std::string& content) {
  char path[] = "/tmp/bpfprof_json_XXXXXX";
  int fd = mkstemp(path);
  if (fd < 0) throw std::runtime_error("mkstemp failed");
  ::close(fd);
  std::ofstream(path, std::ios::binary) << content;
  return path;
}

TEST(JsonWriterRandom, LargeRandomDocumentIsValidAndRoundTrips) {
  RandomDocument generator(20240601);
  StringSink sink;
  std::vector<Event> expected = {Event::of(Event::Kind::BeginArray)};
  {
    JsonWriter w(sink);
    w.begin_array();
    while (sink.str().size() < 4 * 1024 * 1024) generator.write_value(w, 0, expected);
    w.end_array();
    EXPECT_TRUE(w.complete());
  }
  expected.push_back(Event::of(Event::Kind::EndArray));
  const std::string& text = sink.str();
  EXPECT_EQ(text.find("\xE2\x80\xA8"), std::string::npos);
  EXPECT_EQ(text.find("\xE2\x80\xA9"), std::string::npos);

  std::vector<Event> parsed;
  try {
    parsed = parse_events(text);
  } catch (const std::exception& e) {
    FAIL() << "writer produced invalid JSON: " << e.what();
  }
  expect_same_events(expected, parsed);

  if (!python_available()) GTEST_SKIP() << "python3 not available for the cross-check";
  std::string path = write_temp_file(text);
  // A second, independent parser: strict UTF-8 decode, then json.
  std::string command =
      "python3 -c 'import json,sys; json.loads(sys.stdin.buffer.read().decode(\"utf-8\"))' < " +
      path;
  int status = std::system(command.c_str());
  ::unlink(path.c_str());
  EXPECT_EQ(status, 0) << "python rejected the document";
}

TEST(JsonWriterRandom, ReplacementMatchesPythonsMaximalSubpartDecoder) {
  if (!python_available()) GTEST_SKIP() << "python3 not available";
  // Python's bytes.decode('utf-8', 'replace') implements the Unicode "maximal subpart"
  // practice; it is a reference independent of ours. Each pair is [hex of input, output].
  RandomDocument generator(777);
  std::string text = to_json([&](JsonWriter& w) {
    w.begin_array();
    for (int i = 0; i < 20000; ++i) {
      std::string bytes = generator.random_bytes();
      static constexpr char kHex[] = "0123456789abcdef";
      std::string hex;
      for (unsigned char c : bytes) {
        hex += kHex[c >> 4];
        hex += kHex[c & 15];
      }
      w.begin_array();
      w.string(hex);
      w.string(bytes);
      w.end_array();
    }
    w.end_array();
  });
  std::string path = write_temp_file(text);
  std::string command =
      "python3 -c '\n"
      "import json, sys\n"
      "pairs = json.loads(sys.stdin.buffer.read().decode(\"utf-8\"))\n"
      "bad = [p for p in pairs if bytes.fromhex(p[0]).decode(\"utf-8\", \"replace\") != p[1]]\n"
      "print(\"mismatches:\", len(bad), bad[:3]) if bad else None\n"
      "sys.exit(1 if bad else 0)' < " +
      path;
  int status = std::system(command.c_str());
  ::unlink(path.c_str());
  EXPECT_EQ(status, 0);
}

}  // namespace
}  // namespace bpfprof
