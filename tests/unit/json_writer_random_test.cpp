// Random documents written and parsed back event by event, and the replacement of invalid
// UTF-8 against Python's decoder.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "tests/unit/json_writer_reference.h"
#include "userspace/output/json_writer.h"

namespace bpfprof {
namespace {

using namespace json_test;

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
