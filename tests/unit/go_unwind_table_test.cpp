// The unwind tables of Go binaries (symbols/dwarf/unwind_table.h with Go's own pcsp tables,
// symbols/go/pclntab.h): every Go function covered, the caller's frame where .debug_frame
// (written by Go's linker into the unstripped build) says it is, and the stacks' ends where Go's
// own traceback ends them.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include <dwarf.h>
#include <elfutils/libdw.h>

#include "symbols/dwarf/dwarf_module.h"
#include "symbols/dwarf/unwind_table.h"
#include "symbols/go/pclntab.h"
#include "symbols/go/vdso_calls.h"
#include "tests/unit/test_helpers.h"

namespace bpfprof {
namespace {

using testing_helpers::go_fixture;
using testing_helpers::go_table;

bool go_fixtures_missing() {
  if (std::filesystem::exists(go_fixture("go_cpu_stripped"))) return false;
  // CI builds them (golang-go is one of the project's dependencies): there, missing is a failure.
  const char* ci = std::getenv("CI");
  if (ci && std::string(ci) == "true") ADD_FAILURE() << "the Go fixtures were not built";
  return true;
}

const std::vector<UnwindRow>* rows_of(const UnwindTableResult& result) {
  return std::holds_alternative<UnwindTable>(result) ? &std::get<UnwindTable>(result).rows
                                                     : nullptr;
}

class GoUnwindTable : public testing::TestWithParam<const char*> {};

// Every Go function's code is under rows the kernel walk follows, each function's entry has
// the caller's frame right above the return address, and the functions that begin a
// goroutine's or thread's stack (or switch stacks) end the walk.
TEST_P(GoUnwindTable, CoversGoCodeAndEndsAtGoRoots) {
  if (go_fixtures_missing()) GTEST_SKIP() << "no Go fixtures";
  const std::string path = go_fixture(GetParam());
  const UnwindTableResult result = build_unwind_table(path);
  const std::vector<UnwindRow>* rows = rows_of(result);
  ASSERT_NE(rows, nullptr);
  std::unique_ptr<go::GoTable> table = go_table(path);
  ASSERT_TRUE(table);
  size_t functions = 0;
  size_t restorers = 0;
  std::vector<std::string> roots;
  for (size_t i = 0; i < table->function_count(); ++i) {
    std::optional<go::GoFunction> f = table->function(i);
    std::optional<go::FrameLayout> layout = table->frame_layout(i);
    if (!f || !layout) continue;
    ++functions;
    const UnwindRow* entry = find_unwind_row(*rows, f->entry);
    ASSERT_NE(entry, nullptr) << f->name;
    if (entry->cfa_rule == BPFPROF_CFA_ROOT) {
      roots.emplace_back(f->name);
      continue;
    }
    // The signal restorer: the interrupted context at sp, from the padding byte before it on.
    if (go::is_signal_return(f->name)) {
      ++restorers;
      EXPECT_EQ(entry->cfa_rule, BPFPROF_CFA_SIGNAL) << f->name;
      EXPECT_EQ(find_unwind_row(*rows, f->entry - 1)->cfa_rule, BPFPROF_CFA_SIGNAL) << f->name;
      continue;
    }
    EXPECT_EQ(entry->cfa_rule, BPFPROF_CFA_RSP) << f->name;
    EXPECT_EQ(entry->cfa_offset, 8) << f->name;
    const uint64_t code_end = layout->sp.empty() ? f->entry : layout->sp.back().end;
    for (uint64_t pc = f->entry; pc < code_end; pc += 3) {
      const UnwindRow* row = find_unwind_row(*rows, pc);
      ASSERT_NE(row, nullptr);
      // A vDSO caller's frame base where it runs the call on the system stack.
      ASSERT_TRUE(row->cfa_rule == BPFPROF_CFA_RSP ||
                  (row->cfa_rule == BPFPROF_CFA_GO_FRAME_BASE && go::calls_vdso(f->name)))
          << f->name << " +" << pc - f->entry;
    }
  }
  EXPECT_GT(functions, 1000u);
  EXPECT_EQ(restorers, 1u);
  // Go's traceback stops at its signal trampoline; the walk goes on to the restorer above it.
  EXPECT_EQ(std::find(roots.begin(), roots.end(), "runtime.sigtramp"), roots.end());
  for (const char* root : {"runtime.goexit", "runtime.mstart", "runtime.rt0_go",
                           "runtime.systemstack", "runtime.mcall", "runtime.morestack"})
    EXPECT_NE(std::find_if(roots.begin(), roots.end(),
                           [&](const std::string& name) { return name.starts_with(root); }),
              roots.end())
        << root << " does not end the walk";
}

// The CFA offsets read from Go's pcsp tables are those of the .debug_frame that Go's linker
// writes into an unstripped build, at every third byte of every Go function that has one.
TEST(GoUnwindTable, AgreesWithGoDebugFrame) {
  if (go_fixtures_missing()) GTEST_SKIP() << "no Go fixtures";
  const std::string path = go_fixture("go_cpu");
  const std::vector<UnwindRow>* rows = nullptr;
  const UnwindTableResult result = build_unwind_table(path);
  ASSERT_NE(rows = rows_of(result), nullptr);
  std::unique_ptr<DwarfModule> module = DwarfModule::open(path, {});
  ASSERT_TRUE(module);
  const DwarfModule::CallFrameInfo cfi = module->call_frame_info(CfiSection::kDebugFrame);
  ASSERT_NE(cfi.cfi, nullptr) << "the unstripped Go fixture has .debug_frame";
  std::unique_ptr<go::GoTable> table = go_table(path);
  ASSERT_TRUE(table);
  size_t compared = 0;
  for (size_t i = 0; i < table->function_count(); ++i) {
    std::optional<go::GoFunction> f = table->function(i);
    std::optional<go::FrameLayout> layout = table->frame_layout(i);
    if (!f || !layout || layout->end != go::TracebackEnd::kNo || layout->sp.empty() ||
        go::is_signal_return(f->name))
      continue;
    for (uint64_t pc = f->entry; pc < layout->sp.back().end; pc += 3) {
      Dwarf_Frame* frame = nullptr;
      if (dwarf_cfi_addrframe(cfi.cfi, pc + cfi.cfi_minus_vaddr, &frame) != 0) continue;
      Dwarf_Op* ops = nullptr;
      size_t count = 0;
      const bool simple = dwarf_frame_cfa(frame, &ops, &count) == 0 && count == 1 &&
                          ops[0].atom == DW_OP_bregx && ops[0].number == 7;  // rsp
      const int64_t expected = simple ? static_cast<int64_t>(ops[0].number2) : -1;
      free(frame);
      if (!simple) continue;
      const UnwindRow* row = find_unwind_row(*rows, pc);
      ASSERT_NE(row, nullptr);
      ASSERT_EQ(row->cfa_offset, expected) << f->name << " +" << pc - f->entry;
      ++compared;
    }
  }
  EXPECT_GT(compared, 10000u);
}

INSTANTIATE_TEST_SUITE_P(Go, GoUnwindTable, testing::Values("go_cpu", "go_cpu_stripped"));

}  // namespace
}  // namespace bpfprof
