#include "symbols/jit/perf_map.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <random>
#include <string>

#include <unistd.h>

namespace bpfprof {
namespace {

TEST(PerfMapTest, ParsesLinesWithAndWithout0x) {
  const PerfMap map = PerfMap::parse(
      "7f0000001000 40 jit_spin_function\n"
      "0x7f0000002000 0x100 LazyCompile:~foo /app/x.js:12:3\n"
      "7F0000003000 10 UPPER\n");
  ASSERT_EQ(map.size(), 3u);
  const PerfMapEntry* e = map.lookup(0x7f0000001000);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->name, "jit_spin_function");
  EXPECT_EQ(e->start, 0x7f0000001000u);
  EXPECT_EQ(e->size, 0x40u);
  EXPECT_EQ(map.lookup(0x7f000000103f)->name, "jit_spin_function");
  EXPECT_EQ(map.lookup(0x7f0000001040), nullptr);
  EXPECT_EQ(map.lookup(0x7f0000000fff), nullptr);
  // Spaces inside the name are part of it.
  EXPECT_EQ(map.lookup(0x7f0000002080)->name, "LazyCompile:~foo /app/x.js:12:3");
  EXPECT_EQ(map.lookup(0x7f0000003008)->name, "UPPER");
  EXPECT_EQ(map.lookup(0), nullptr);
  EXPECT_EQ(map.lookup(UINT64_MAX), nullptr);
}

TEST(PerfMapTest, LaterEntriesWin) {
  const PerfMap map = PerfMap::parse(
      "1000 100 old\n"
      "1000 100 new\n"  // the same range, re-emitted
      "2000 100 wide\n"
      "2040 20 narrow\n"  // inside wide: splits it
      "3000 100 a\n"
      "3080 100 b\n");  // overlaps a's tail
  EXPECT_EQ(map.lookup(0x1000)->name, "new");
  EXPECT_EQ(map.lookup(0x10ff)->name, "new");
  EXPECT_EQ(map.lookup(0x2000)->name, "wide");
  EXPECT_EQ(map.lookup(0x203f)->name, "wide");
  EXPECT_EQ(map.lookup(0x2040)->name, "narrow");
  EXPECT_EQ(map.lookup(0x205f)->name, "narrow");
  EXPECT_EQ(map.lookup(0x2060)->name, "wide");
  EXPECT_EQ(map.lookup(0x20ff)->name, "wide");
  EXPECT_EQ(map.lookup(0x2100), nullptr);
  EXPECT_EQ(map.lookup(0x307f)->name, "a");
  EXPECT_EQ(map.lookup(0x3080)->name, "b");
  EXPECT_EQ(map.lookup(0x317f)->name, "b");
  EXPECT_EQ(map.lookup(0x3180), nullptr);
  // Entries are kept whole: the start and size of the line that names the address.
  EXPECT_EQ(map.lookup(0x2060)->start, 0x2000u);
  EXPECT_EQ(map.lookup(0x2060)->size, 0x100u);
  EXPECT_EQ(map.size(), 5u);  // "old" names nothing any more
}

TEST(PerfMapTest, LaterEntryCoveringSeveral) {
  const PerfMap map = PerfMap::parse(
      "1000 10 a\n"
      "1020 10 b\n"
      "1040 10 c\n"
      "1008 40 big\n");  // takes a's tail, all of b, c's head
  EXPECT_EQ(map.lookup(0x1007)->name, "a");
  EXPECT_EQ(map.lookup(0x1008)->name, "big");
  EXPECT_EQ(map.lookup(0x1025)->name, "big");
  EXPECT_EQ(map.lookup(0x1047)->name, "big");
  EXPECT_EQ(map.lookup(0x1048)->name, "c");
  EXPECT_EQ(map.lookup(0x104f)->name, "c");
  EXPECT_EQ(map.lookup(0x1050), nullptr);
  EXPECT_EQ(map.size(), 3u);
}

TEST(PerfMapTest, SkipsGarbage) {
  const PerfMap map = PerfMap::parse(
      "\n"
      "garbage\n"
      "1000\n"        // no size
      "1000 20\n"     // no name
      "1000 20   \n"  // blank name
      "zz00 20 bad_start\n"
      "1000 2g bad_size\n"
      "1000 0 empty\n"
      "ffffffffffffff00 200 overflow\n"
      "10000000000000000 10 too_big\n"
      "0x 10 just_prefix\n"
      "-1000 10 negative\n"
      "  2000\t30\tgood one\r\n"  // tabs, leading blanks, CRLF
      "3000 10 last");            // no trailing newline
  EXPECT_EQ(map.size(), 2u);
  ASSERT_NE(map.lookup(0x2010), nullptr);
  EXPECT_EQ(map.lookup(0x2010)->name, "good one");
  EXPECT_EQ(map.lookup(0x3000)->name, "last");
  EXPECT_EQ(map.lookup(0x1000), nullptr);
}

TEST(PerfMapTest, RandomBytesDoNotCrash) {
  std::mt19937_64 rng(7);
  for (int i = 0; i < 2000; i++) {
    std::string text;
    const size_t len = rng() % 512;
    const std::string alphabet = "0123456789abcdefx \n\t\r_zq";
    for (size_t k = 0; k < len; k++)
      text.push_back(i % 2 ? static_cast<char>(rng() % 256) : alphabet[rng() % alphabet.size()]);
    const PerfMap map = PerfMap::parse(text);
    for (int k = 0; k < 16; k++) {
      const uint64_t a = rng() % 0x20000;
      const PerfMapEntry* e = map.lookup(a);
      if (e) {
        EXPECT_GE(a, e->start);
        EXPECT_LT(a - e->start, e->size);
      }
    }
  }
}

TEST(PerfMapTest, ManyEntriesLookUpFast) {
  std::string text;
  for (uint64_t i = 0; i < 100000; i++) {
    char line[64];
    snprintf(line, sizeof(line), "%llx %x fn_%llu\n",
             static_cast<unsigned long long>(0x10000 + i * 0x40), 0x40,
             static_cast<unsigned long long>(i));
    text += line;
  }
  const PerfMap map = PerfMap::parse(text);
  EXPECT_EQ(map.size(), 100000u);
  EXPECT_EQ(map.lookup(0x10000 + 12345 * 0x40 + 7)->name, "fn_12345");
}

TEST(PerfMapTest, LoadsAFile) {
  char path[] = "/tmp/perf-map-test-XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  {
    std::ofstream out(path);
    out << "7f00dead0000 80 jit_spin_function\n";
  }
  const std::optional<PerfMap> map = PerfMap::load(path, 0);
  unlink(path);
  ASSERT_TRUE(map.has_value());
  ASSERT_NE(map->lookup(0x7f00dead0010), nullptr);
  EXPECT_EQ(map->lookup(0x7f00dead0010)->name, "jit_spin_function");
  EXPECT_FALSE(PerfMap::load("/nonexistent/perf-1.map", 0).has_value());
}

}  // namespace
}  // namespace bpfprof
