// runtimes/v8/stacks.h's V8Namer on a pretend heap (tests/unit/v8_fake_heap.h): a function
// named from its SharedFunctionInfo alone, a name read while its script's source could not be
// read (the collector moving it) read again a little later, and an interpreted frame's line
// from the BytecodeArray its frame holds; the cache checked by the digests of headers that the
// kernel sends, without reading the process.
#include <gtest/gtest.h>

#include "runtimes/v8/stacks.h"
#include "tests/unit/v8_fake_heap.h"

namespace bpfprof::v8 {
namespace {

// A clock the test moves: a reread's due time does not depend on how fast the test runs.
struct ManualClock {
  uint64_t ns = 1'000'000'000;
  V8Namer::Clock clock() {
    return [this] { return ns; };
  }
  void advance_ms(uint64_t ms) { ns += ms * 1'000'000; }
};

// Bytecode offsets 0-4 at script position 10, 5-11 at 40, 12 on at 80.
using fake::kPositions;

// The heap's bytes with the string whose characters are `text` made unreadable (its map's
// instance type not a string's), as while the collector moves it.
std::string with_string_broken(std::string bytes, const std::string& text) {
  const size_t chars = bytes.find(text);
  uint64_t map = 0;
  std::memcpy(&map, bytes.data() + chars - 16, 8);
  const uint16_t not_a_string = 0xffff;
  std::memcpy(bytes.data() + (map - 1 - fake::kHeapAt) + 12, &not_a_string, 2);
  return bytes;
}

TEST(V8Namer, ALineNotReadIsReadAgainLater) {
  fake::Heap heap;
  const std::string source = "'use strict';\n\nfunction recurseFib(n) {\n}\n";
  const uint64_t shared = heap.function("recurseFib", "/srv/work.js", source,
                                        static_cast<int32_t>(source.find("function")));
  fake::Reading moving(with_string_broken(heap.bytes(), source));
  fake::Reading settled(heap.bytes());
  RuntimeFrameTable frames;
  RuntimeStats stats;
  ManualClock clock;
  V8Namer namer(clock.clock());
  const auto first = namer.name(moving.heap, moving.reader, shared, frames, stats);
  ASSERT_TRUE(first);
  EXPECT_EQ(frames.function_of(*first).qualified_name, "recurseFib");
  EXPECT_EQ(frames.function_of(*first).first_line, 0u);
  // At once: the cache answers (a stack after another does not read the source each time).
  EXPECT_EQ(namer.name(settled.heap, settled.reader, shared, frames, stats), first);
  clock.advance_ms(25);
  SharedHeader header{};
  ASSERT_TRUE(settled.reader.read(shared - 1, header.data(), sizeof(header)));
  EXPECT_FALSE(namer.cached_frame(shared, header)) << "due for another read";
  const auto again = namer.name(settled.heap, settled.reader, shared, frames, stats);
  ASSERT_TRUE(again);
  EXPECT_EQ(frames.function_of(*again).first_line, 3u);
  EXPECT_EQ(namer.cached_frame(shared, header), again);
  EXPECT_EQ(stats.code_objects_read, 2u);
  // The samples named by the first read show the line too.
  EXPECT_EQ(frames.function_of(*first).first_line, 3u);
  EXPECT_EQ(frames.frame(*first).line, 3u);
  EXPECT_EQ(frames.frame(*first).function, frames.frame(*again).function);
}

// Two functions of one name in one file (anonymous ones), both read before their lines could
// be: each keeps a frame of its own, and each gets its own line later.
TEST(V8Namer, FunctionsReadWithoutTheirLinesAreNotMerged) {
  fake::Heap heap;
  // Each its own Script here (the fake heap's), of one file.
  const std::string source_one = "x(function () {\n});\n";
  const std::string source_two = "\n\n\ny(function () {\n});\n";
  const uint64_t one = heap.function("", "/srv/a.js", source_one, 2);
  const uint64_t two = heap.function("", "/srv/a.js", source_two, 5);
  fake::Reading moving(
      with_string_broken(with_string_broken(heap.bytes(), source_one), source_two));
  fake::Reading settled(heap.bytes());
  RuntimeFrameTable frames;
  RuntimeStats stats;
  ManualClock clock;
  V8Namer namer(clock.clock());
  const auto first_one = namer.name(moving.heap, moving.reader, one, frames, stats);
  const auto first_two = namer.name(moving.heap, moving.reader, two, frames, stats);
  ASSERT_TRUE(first_one && first_two);
  EXPECT_NE(*first_one, *first_two);
  clock.advance_ms(25);
  ASSERT_TRUE(namer.name(settled.heap, settled.reader, one, frames, stats));
  ASSERT_TRUE(namer.name(settled.heap, settled.reader, two, frames, stats));
  EXPECT_EQ(frames.function_of(*first_one).first_line, 1u);
  EXPECT_EQ(frames.function_of(*first_two).first_line, 4u);
  EXPECT_EQ(frames.function_of(*first_one).qualified_name, "(anonymous)");
}

TEST(V8Namer, AReadThatKeepsFailingStopsBeingRetried) {
  fake::Heap heap;
  const std::string source = "function f() {}\n";
  const uint64_t shared = heap.function("f", "a.js", source, 0);
  fake::Reading moving(with_string_broken(heap.bytes(), source));
  RuntimeFrameTable frames;
  RuntimeStats stats;
  ManualClock clock;
  V8Namer namer(clock.clock());
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(namer.name(moving.heap, moving.reader, shared, frames, stats));
    clock.advance_ms(70);
  }
  EXPECT_EQ(stats.code_objects_read, 3u);
}

TEST(V8Namer, AnInterpretedFrameIsAtTheLineOfItsBytecodeOffset) {
  fake::Heap heap;
  std::string source(90, ' ');
  source[29] = '\n';  // positions 10, 40 and 80 on lines 1, 2 and 3
  source[59] = '\n';
  const uint64_t bytecode = heap.bytecode_array(kPositions);
  const uint64_t shared = heap.function("f", "a.js", source, 0);  // no function data
  fake::Reading reading(heap.bytes());
  RuntimeFrameTable frames;
  RuntimeStats stats;
  V8Namer namer;
  ASSERT_TRUE(namer.name(reading.heap, reading.reader, shared, frames, stats));
  EXPECT_EQ(namer.line_at(reading.heap, reading.reader, shared, bytecode, 4), 1u);
  EXPECT_EQ(namer.line_at(reading.heap, reading.reader, shared, bytecode, 5), 2u);
  EXPECT_EQ(namer.line_at(reading.heap, reading.reader, shared, bytecode, 500), 3u);
  // Neither the frame's nor the function's: no line.
  EXPECT_EQ(namer.line_at(reading.heap, reading.reader, shared, 0, 0), 0u);
  EXPECT_EQ(namer.line_at(reading.heap, reading.reader, shared, shared, 0), 0u);
}

// The digest the kernel sends of a function's header answers from the cache while the header
// is the same; another digest (the address holds another object now) does not.
TEST(V8Namer, TheKernelsDigestOfAHeaderChecksTheCache) {
  fake::Heap heap;
  const std::string source = "function f() {}\n";
  const uint64_t shared = heap.function("f", "a.js", source, 0);
  fake::Reading reading(heap.bytes());
  RuntimeFrameTable frames;
  RuntimeStats stats;
  V8Namer namer;
  const auto named = namer.name(reading.heap, reading.reader, shared, frames, stats);
  ASSERT_TRUE(named);
  SharedHeader header{};
  ASSERT_TRUE(reading.reader.read(shared - 1, header.data(), sizeof(header)));
  EXPECT_EQ(namer.cached_frame(shared, header_hash(header)), named);
  SharedHeader other = header;
  other[4] += 8;
  EXPECT_FALSE(namer.cached_frame(shared, header_hash(other)));
  EXPECT_FALSE(namer.cached_frame(shared + 64, header_hash(header)));
  // The same digest made on the kernel's side (plain C, its own word type).
  __u64 words[kSharedHeaderWords];
  std::copy(header.begin(), header.end(), words);
  EXPECT_EQ(bpfprof_v8_header_hash(words, kSharedHeaderWords), header_hash(header));
  EXPECT_NE(header_hash(header), 0u);
}

// An interpreted frame's line from the cached source positions when the kernel's digest of its
// BytecodeArray's header matches, without reading it; with another digest it is read again.
TEST(V8Namer, AnInterpretedFramesLineByTheKernelsDigest) {
  fake::Heap heap;
  std::string source(90, ' ');
  source[29] = '\n';
  source[59] = '\n';
  const uint64_t bytecode = heap.bytecode_array(kPositions);
  const uint64_t shared = heap.function("f", "a.js", source, 0);
  fake::Reading reading(heap.bytes());
  fake::Reading unreadable("");
  RuntimeFrameTable frames;
  RuntimeStats stats;
  V8Namer namer;
  ASSERT_TRUE(namer.name(reading.heap, reading.reader, shared, frames, stats));
  BytecodeHeader header{};
  ASSERT_TRUE(reading.reader.read(bytecode - 1, header.data(), sizeof(header)));
  const BytecodeSeen seen{nullptr, header_hash(header)};
  // Not in the cache yet: read.
  EXPECT_EQ(namer.line_at(unreadable.heap, unreadable.reader, shared, bytecode, 5, seen), 0u);
  EXPECT_EQ(namer.line_at(reading.heap, reading.reader, shared, bytecode, 5, seen), 2u);
  // Cached: the digest answers, nothing read.
  EXPECT_EQ(namer.line_at(unreadable.heap, unreadable.reader, shared, bytecode, 500, seen), 3u);
  BytecodeHeader changed = header;
  changed[7] ^= 0x100;
  const BytecodeSeen other{nullptr, header_hash(changed)};
  EXPECT_EQ(namer.line_at(unreadable.heap, unreadable.reader, shared, bytecode, 500, other), 0u);
}

}  // namespace
}  // namespace bpfprof::v8
