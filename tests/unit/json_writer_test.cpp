#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <limits>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "tests/unit/json_writer_reference.h"
#include "userspace/output/json_writer.h"

namespace bpfprof {
namespace {

using namespace json_test;

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

}  // namespace
}  // namespace bpfprof
