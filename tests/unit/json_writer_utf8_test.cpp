// The JSON writer's strings: valid UTF-8 kept, invalid bytes replaced as the reference does.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/unit/json_writer_reference.h"
#include "userspace/output/json_writer.h"

namespace bpfprof {
namespace {

using namespace json_test;

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

}  // namespace
}  // namespace bpfprof
