// runtimes/v8: the layout read from node's own metadata, and JS functions named from a pretend
// heap (tests/unit/v8_fake_heap.h), also where its objects are not what they claim.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <variant>

#include "runtimes/v8/objects.h"
#include "runtimes/v8/processes.h"
#include "tests/unit/v8_fake_heap.h"

namespace bpfprof::v8 {
namespace {

constexpr const char* kNode = "/usr/bin/node";

TEST(V8Layout, NodeBinaryExportsTheLayoutOfItsV8) {
  if (!std::filesystem::exists(kNode)) GTEST_SKIP() << "no " << kNode;
  const auto layout = read_binary_layout(kNode);
  ASSERT_TRUE(std::holds_alternative<V8Layout>(layout)) << std::get<std::string>(layout);
  const V8Layout& l = std::get<V8Layout>(layout);
  const V8Layout want = fake::node20_layout();
  EXPECT_EQ(l.off_fp_function, want.off_fp_function);
  EXPECT_EQ(l.off_fp_bytecode_offset, want.off_fp_bytecode_offset);
  EXPECT_EQ(l.off_fp_bytecode_array, want.off_fp_bytecode_array);
  EXPECT_EQ(l.function_shared, want.function_shared);
  EXPECT_EQ(l.shared_name_or_scope_info, want.shared_name_or_scope_info);
  EXPECT_EQ(l.type_shared_function_info, want.type_shared_function_info);
  EXPECT_EQ(l.type_scope_info, want.type_scope_info);
  EXPECT_EQ(l.first_nonstring_type, want.first_nonstring_type);
}

TEST(V8Layout, AFileWithoutTheMetadataIsRefused) {
  const auto layout = read_binary_layout("/bin/true");
  ASSERT_TRUE(std::holds_alternative<std::string>(layout));
  EXPECT_NE(std::get<std::string>(layout).find("v8dbg_"), std::string::npos);
}

struct Named {
  std::optional<SharedInfo> info;
  std::string script;
  uint32_t line = 0;
};

Named name_of(const fake::Heap& heap, uint64_t shared, V8ReadLimits limits = {}) {
  fake::Reading reading(heap.bytes(), limits);
  V8Heap& v8 = reading.heap;
  Named out;
  out.info = v8.read_shared(shared);
  if (!out.info || !out.info->script) return out;
  out.script = v8.script_name(out.info->script).value_or("");
  out.line =
      line_of_position(v8.script_line_starts(out.info->script).value_or(std::vector<uint32_t>{}),
                       out.info->start_position);
  return out;
}

TEST(V8Objects, AFunctionIsNamedWithItsScriptAndFirstLine) {
  fake::Heap heap;
  const std::string source = "'use strict';\n\nfunction recurseFib(n) {\n}\n";
  const uint64_t f = heap.function("recurseFib", "/srv/work.js", source,
                                   static_cast<int32_t>(source.find("function")));
  const Named n = name_of(heap, f);
  ASSERT_TRUE(n.info);
  EXPECT_EQ(n.info->name, "recurseFib");
  EXPECT_EQ(n.script, "/srv/work.js");
  EXPECT_EQ(n.line, 3u);
}

TEST(V8Objects, ContextLocalsBeforeTheNameAreSkipped) {
  fake::Heap heap;
  const uint64_t f = heap.function("makeCounter", "a.js", "x\ny\nz", 4, /*locals=*/5);
  const Named n = name_of(heap, f);
  ASSERT_TRUE(n.info);
  EXPECT_EQ(n.info->name, "makeCounter");
  EXPECT_EQ(n.line, 3u);
}

TEST(V8Objects, ConsStringsAreJoinedAndNamesCut) {
  fake::Heap heap;
  const uint64_t joined =
      heap.cons_string(heap.one_byte_string("sort"), heap.one_byte_string("Work"), 8);
  fake::Reading reading(heap.bytes(), {.max_name_chars = 6});
  V8Heap& v8 = reading.heap;
  EXPECT_EQ(utf8_of(v8.read_string(joined, 100).value()), "sortWork");
  EXPECT_EQ(utf8_of(v8.read_string(joined, 6).value()), "sortWo");
}

TEST(V8Objects, CachedExternalStringsAreReadUncachedOnesNot) {
  fake::Heap heap;
  const uint64_t cached = heap.external_string("node:internal/main");
  const uint64_t uncached = heap.external_string("node:internal/main", /*uncached=*/true);
  fake::Reading reading(heap.bytes());
  V8Heap& v8 = reading.heap;
  EXPECT_EQ(utf8_of(v8.read_string(cached, 100).value()), "node:internal/main");
  EXPECT_EQ(utf8_of(v8.read_string(cached, 4).value()), "node");
  EXPECT_FALSE(v8.read_string(uncached, 100));
}

TEST(V8Objects, WordsThatAreNotAFunctionGiveNothing) {
  fake::Heap heap;
  const uint64_t f = heap.function("f", "a.js", "", 0);
  const uint64_t not_function = heap.object(167, {0, 0, f});  // a Script, not a function's info
  EXPECT_FALSE(name_of(heap, not_function).info);
  EXPECT_FALSE(name_of(heap, 0x1234).info);      // a Smi
  EXPECT_FALSE(name_of(heap, 0xdead0001).info);  // outside the heap
  EXPECT_FALSE(name_of(heap, f + 8).info);       // inside an object
}

TEST(V8Objects, ACyclicConsStringEndsAtTheDepthLimit) {
  fake::Heap heap;
  const uint64_t s = heap.cons_string(0, 0, 100);
  // Point the string's halves at itself.
  std::string bytes = heap.bytes();
  const uint64_t at = s - 1 - fake::kHeapAt;
  std::memcpy(bytes.data() + at + 16, &s, 8);
  std::memcpy(bytes.data() + at + 24, &s, 8);
  fake::Reading reading(bytes);
  V8Heap& v8 = reading.heap;
  EXPECT_FALSE(v8.read_string(s, 100));
}

// Entries (code offset, script offset): (0, 10) a statement, (5, 40) an expression, (12, 80):
// deltas, the code's zigzag-coded (an expression's as -delta - 1), the raw positions' (script
// offset + 1, from bit 1) too, 7 bits a byte.
const std::vector<uint8_t> kPositions{0, 44, 11, 120, 14, 0xa0, 0x01};

TEST(V8Objects, SourcePositionTablesAreDecoded) {
  const auto positions = decode_source_positions(kPositions.data(), kPositions.size());
  ASSERT_TRUE(positions);
  ASSERT_EQ(positions->size(), 3u);
  EXPECT_EQ((*positions)[1].code_offset, 5);
  EXPECT_EQ((*positions)[1].script_offset, 40);
  EXPECT_EQ(script_offset_at(*positions, 4), 10);
  EXPECT_EQ(script_offset_at(*positions, 5), 40);
  EXPECT_EQ(script_offset_at(*positions, 11), 40);
  EXPECT_EQ(script_offset_at(*positions, 500), 80);
  // Cut inside an entry, a VLQ without end, code going beyond 31 bits: not a table.
  EXPECT_FALSE(decode_source_positions(kPositions.data(), 6));
  const std::vector<uint8_t> endless(12, 0xff);
  EXPECT_FALSE(decode_source_positions(endless.data(), endless.size()));
  const std::vector<uint8_t> far{0xfe, 0xff, 0xff, 0xff, 0x0f, 0, 0xfe, 0xff, 0xff, 0xff, 0x0f, 0};
  EXPECT_FALSE(decode_source_positions(far.data(), far.size()));
  // One delta of 62 bits (a sum would overflow): refused before it is added.
  const std::vector<uint8_t> huge{0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, 0};
  EXPECT_FALSE(decode_source_positions(huge.data(), huge.size()));
}

TEST(V8Objects, AnInterpretedFunctionsPositionsComeFromItsBytecode) {
  fake::Heap heap;
  const uint64_t f = heap.function("f", "a.js", "x", 0, 0, heap.bytecode_array(kPositions));
  const uint64_t undefined = heap.object(131, {});
  const uint64_t lazy =
      heap.function("g", "a.js", "x", 0, 0,
                    heap.object(191, {fake::smi(4), heap.object(129, {fake::smi(0)}),
                                      heap.byte_array({1, 2}), undefined, 0, 0}));
  const uint64_t no_bytecode = heap.function("h", "a.js", "x", 0);
  fake::Reading reading(heap.bytes());
  V8Heap& v8 = reading.heap;
  const auto bytecode = v8.bytecode_of(f);
  ASSERT_TRUE(bytecode);
  const auto positions = v8.bytecode_positions(*bytecode);
  ASSERT_TRUE(positions);
  EXPECT_EQ(script_offset_at(*positions, 6), 40);
  // No table made (V8 makes them lazily): the handler table, a ByteArray too, is not read.
  EXPECT_FALSE(v8.bytecode_positions(v8.bytecode_of(lazy).value()));
  EXPECT_FALSE(v8.bytecode_of(no_bytecode));
  // Something else than a BytecodeArray (a frame slot read at the wrong time): no table.
  EXPECT_FALSE(v8.bytecode_positions(f));
}

TEST(V8Objects, LinesOfPositions) {
  const std::vector<uint32_t> starts{0, 5, 9};
  EXPECT_EQ(line_of_position(starts, 0), 1u);
  EXPECT_EQ(line_of_position(starts, 5), 2u);
  EXPECT_EQ(line_of_position(starts, 100), 3u);
  EXPECT_EQ(line_of_position(starts, -1), 0u);
  EXPECT_EQ(utf8_of(u"\u00e9\U0001F600"), "\xc3\xa9\xf0\x9f\x98\x80");
}

}  // namespace
}  // namespace bpfprof::v8
