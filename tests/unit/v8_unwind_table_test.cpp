// The rows of V8's embedded builtins (symbols/dwarf/v8_builtins.h, no_cfi_spans.h): code
// without CFI between v8_Default_embedded_blob_code_ and its size gets the frame-pointer rule
// (CFA = rbp + 16, the caller's rbp at CFA - 16), code with CFI inside it keeps its own rules,
// and a file that is not V8 gets none. On the v8_blob fixture, and on the system's node when
// it is installed.
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "symbols/dwarf/dwarf_module.h"
#include "symbols/dwarf/unwind_table.h"
#include "symbols/dwarf/v8_builtins.h"
#include "symbols/elf/elf_file.h"
#include "tests/unit/test_helpers.h"

namespace bpfprof {
namespace {

using testing_helpers::kLibc;
using testing_helpers::table_of;

const std::string kFixture = std::string(TEST_FIXTURE_DIR) + "/v8_blob";
const char* const kNode = "/usr/bin/node";

std::optional<V8EmbeddedCode> embedded_code_of(const std::string& path) {
  const std::unique_ptr<DwarfModule> module = DwarfModule::open(path, {});
  if (module == nullptr || module->elf() == nullptr) return std::nullopt;
  return find_v8_embedded_code(module->elf());
}

uint64_t symbol_address(const std::string& path, const std::string& name) {
  const std::unique_ptr<ElfFile> elf = ElfFile::open(path, nullptr);
  if (elf == nullptr) return 0;
  for (const Symbol& symbol : elf->symbols())
    if (symbol.name == name) return symbol.address;
  return 0;
}

bool is_frame_pointer_row(const UnwindRow* row) {
  return row != nullptr && row->cfa_rule == BPFPROF_CFA_RBP && row->cfa_offset == 16 &&
         row->rbp_rule == BPFPROF_RBP_AT_CFA && row->rbp_offset == -16;
}

TEST(V8UnwindTable, FindsTheEmbeddedBlobBySymbols) {
  const std::optional<V8EmbeddedCode> blob = embedded_code_of(kFixture);
  ASSERT_TRUE(blob.has_value());
  // The blob's first builtin shares its address with the blob's own symbol: either names it.
  const uint64_t first = symbol_address(kFixture, "Builtins_FakeEntry") |
                         symbol_address(kFixture, "v8_Default_embedded_blob_code_");
  EXPECT_EQ(blob->start, first);
  EXPECT_GT(blob->end, symbol_address(kFixture, "Builtins_FakeTail"));
  EXPECT_FALSE(embedded_code_of(kLibc).has_value());
}

TEST(V8UnwindTable, BlobWithoutCfiIsWalkedByFramePointer) {
  const std::optional<V8EmbeddedCode> blob = embedded_code_of(kFixture);
  ASSERT_TRUE(blob.has_value());
  const UnwindTable table = table_of(kFixture);
  const uint64_t with_cfi = symbol_address(kFixture, "blob_with_cfi");
  ASSERT_NE(with_cfi, 0u);
  for (uint64_t pc = blob->start; pc < blob->end; ++pc) {
    const UnwindRow* row = find_unwind_row(table.rows, pc);
    // blob_with_cfi's FDE: `sub $8,%rsp` (4 bytes), `mov $42,%eax` (5), `add $8,%rsp` (4), ret.
    if (pc >= with_cfi && pc < with_cfi + 14) {
      ASSERT_NE(row, nullptr);
      EXPECT_EQ(row->cfa_rule, BPFPROF_CFA_RSP) << std::hex << pc;
      EXPECT_EQ(row->cfa_offset, pc >= with_cfi + 4 && pc < with_cfi + 13 ? 16 : 8)
          << std::hex << pc;
    } else {
      EXPECT_TRUE(is_frame_pointer_row(row)) << std::hex << pc;
    }
  }
  // Past the blob, main keeps its CFI.
  const UnwindRow* main_row = find_unwind_row(table.rows, symbol_address(kFixture, "main"));
  ASSERT_NE(main_row, nullptr);
  EXPECT_EQ(main_row->cfa_rule, BPFPROF_CFA_RSP);
}

TEST(V8UnwindTable, NodesBuiltinsAreCovered) {
  if (!std::filesystem::exists(kNode)) GTEST_SKIP() << kNode << " not installed";
  const std::optional<V8EmbeddedCode> blob = embedded_code_of(kNode);
  if (!blob) GTEST_SKIP() << kNode << " has no V8 blob symbols (stripped)";
  const UnwindTable table = table_of(kNode);
  const uint64_t sort = symbol_address(kNode, "Builtins_ArrayPrototypeSort");
  const uint64_t entry = symbol_address(kNode, "Builtins_JSEntry");
  ASSERT_TRUE(sort >= blob->start && sort < blob->end);
  EXPECT_TRUE(is_frame_pointer_row(find_unwind_row(table.rows, sort + 8)));
  EXPECT_TRUE(is_frame_pointer_row(find_unwind_row(table.rows, entry + 8)));
  EXPECT_TRUE(is_frame_pointer_row(find_unwind_row(table.rows, blob->end - 1)));
  // The rule ends with the blob.
  const UnwindRow* after = find_unwind_row(table.rows, blob->end);
  ASSERT_NE(after, nullptr);
  EXPECT_EQ(after->pc, blob->end);
}

// Chromium's code has CFI only here and there (Debian's: 420 KB of .eh_frame for 236 MB of
// .text) and keeps frame pointers: its code without CFI gets the frame-pointer rule. node's
// code has CFI: no such rule is made up for it.
TEST(V8UnwindTable, ChromiumsCodeWithoutCfiIsWalkedByFramePointers) {
  const char* const chromium = "/usr/lib/chromium/chromium";
  if (!std::filesystem::exists(chromium)) GTEST_SKIP() << chromium << " not installed";
  const UnwindTable table = table_of(chromium);
  const SectionCoverage* text = nullptr;
  for (const SectionCoverage& section : table.coverage)
    if (section.name == ".text") text = &section;
  ASSERT_NE(text, nullptr);
  EXPECT_GT(text->covered_bytes * 10, text->code_bytes() * 9);
  size_t frame_pointer_pcs = 0;
  for (uint64_t pc = text->start; pc < text->end; pc += (text->end - text->start) / 101)
    frame_pointer_pcs += is_frame_pointer_row(find_unwind_row(table.rows, pc)) ? 1 : 0;
  EXPECT_GE(frame_pointer_pcs, 90u);
  if (!std::filesystem::exists(kNode)) return;
  const UnwindTable node = table_of(kNode);
  const UnwindRow* main_row = find_unwind_row(node.rows, symbol_address(kNode, "main"));
  EXPECT_FALSE(is_frame_pointer_row(main_row));
}

}  // namespace
}  // namespace bpfprof
