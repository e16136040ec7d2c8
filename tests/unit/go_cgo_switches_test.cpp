// Go's switches of stacks (symbols/go/cgo_switches.h: cgo's and systemstack's) as read from
// the runtime's code: Go 1.19's (the fixtures, built by Debian's golang-go) and the shape of
// current releases (asmcgocall pushes rbp and keeps g and the depth at sp + 8 and sp;
// systemstack restores rbp too), and the rows the kernel walk gets for them
// (symbols/dwarf/unwind_table.h).
#include <gtest/gtest.h>

#include <array>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "symbols/dwarf/unwind_table.h"
#include "symbols/go/cgo_switches.h"
#include "tests/unit/test_helpers.h"

namespace bpfprof {
namespace {

using testing_helpers::go_fixture;

using go::CgoSwitch;
using go::CgoSwitchKind;

// Go 1.26's asmcgocall (as in a current esbuild release): push %rbp; mov %rsp,%rbp; g from
// the thread pointer ...; mov %rsp,%rdx at sp delta 8; on the system stack g at 8(%rsp) and
// the depth at (%rsp), then `call` (a landing pad that jumps to the C function); the branch
// already on the system stack stores 0 and rdx there.
constexpr std::array<uint8_t, 0xb7> kAsmcgocall126 = {
    0x55, 0x48, 0x89, 0xe5, 0x64, 0x48, 0x8b, 0x3c, 0x25, 0xf8, 0xff, 0xff, 0xff, 0x48, 0x83, 0xff,
    0x00, 0x74, 0x70, 0x4c, 0x8b, 0x47, 0x30, 0x49, 0x8b, 0x70, 0x48, 0x48, 0x39, 0xf7, 0x74, 0x63,
    0x49, 0x8b, 0x30, 0x48, 0x39, 0xf7, 0x74, 0x5b, 0x48, 0x8b, 0x44, 0x24, 0x10, 0x48, 0x8b, 0x5c,
    0x24, 0x18, 0x48, 0x89, 0xe2, 0xe8, 0x46, 0xda, 0xff, 0xff, 0x64, 0x48, 0x89, 0x34, 0x25, 0xf8,
    0xff, 0xff, 0xff, 0x48, 0x8b, 0x66, 0x38, 0x48, 0x83, 0xec, 0x10, 0x48, 0x83, 0xe4, 0xf0, 0x48,
    0x89, 0x7c, 0x24, 0x08, 0x48, 0x8b, 0x7f, 0x08, 0x48, 0x29, 0xd7, 0x48, 0x89, 0x3c, 0x24, 0xe8,
    0x7c, 0xff, 0xff, 0xff, 0x48, 0x8b, 0x7c, 0x24, 0x08, 0x48, 0x8b, 0x77, 0x08, 0x48, 0x2b, 0x34,
    0x24, 0x64, 0x48, 0x89, 0x3c, 0x25, 0xf8, 0xff, 0xff, 0xff, 0x48, 0x89, 0xf4, 0x89, 0x44, 0x24,
    0x20, 0x5d, 0xc3, 0x48, 0x8b, 0x44, 0x24, 0x10, 0x48, 0x8b, 0x5c, 0x24, 0x18, 0x48, 0x89, 0xe2,
    0x48, 0x83, 0xec, 0x10, 0x48, 0x83, 0xe4, 0xf0, 0x48, 0xc7, 0x44, 0x24, 0x08, 0x00, 0x00, 0x00,
    0x00, 0x48, 0x89, 0x14, 0x24, 0xe8, 0x36, 0xff, 0xff, 0xff, 0x48, 0x8b, 0x34, 0x24, 0x48, 0x89,
    0xf4, 0x89, 0x44, 0x24, 0x20, 0x5d, 0xc3};

TEST(GoCgoSwitches, CurrentReleaseAsmcgocall) {
  constexpr uint64_t kEntry = 0x48d240;
  go::FrameLayout layout;
  layout.sp = {{kEntry, kEntry + 1, 0},
               {kEntry + 1, kEntry + 0x82, 8},
               {kEntry + 0x82, kEntry + 0x83, 0},
               {kEntry + 0x83, kEntry + 0xb6, 8},
               {kEntry + 0xb6, kEntry + 0xb7, 0}};
  const std::vector<CgoSwitch> found =
      go::find_cgo_switches("runtime.asmcgocall.abi0", kEntry, kAsmcgocall126, layout);
  ASSERT_EQ(found.size(), 2u);
  EXPECT_EQ(found[0].return_address, 0x48d2a4u);  // past the call on the system stack
  EXPECT_EQ(found[1].return_address, 0x48d2eau);  // past the call already there
  for (const CgoSwitch& cgo : found) {
    EXPECT_EQ(cgo.kind, CgoSwitchKind::kCallIntoC);
    EXPECT_EQ(cgo.cfa_offset, 16);  // rdx + 8 (the pushed rbp) + 8
    EXPECT_TRUE(cgo.rbp_saved);
    EXPECT_EQ(cgo.slot, 0);
  }
  // Another function with the same code gives nothing; so does the code cut short.
  EXPECT_TRUE(go::find_cgo_switches("main.asmcgocall", kEntry, kAsmcgocall126, layout).empty());
  EXPECT_TRUE(go::find_cgo_switches("runtime.asmcgocall", kEntry,
                                    std::span(kAsmcgocall126).first(0x5f), layout)
                  .empty());
}

// Go 1.26's systemstack (esbuild's): push %rbp ...; past `call *%rdi` the way back reads g
// from fs - 8, g.m, m.curg at 0xb8, sp and rbp from its sched, clears them, `pop %rbp; ret`.
constexpr std::array<uint8_t, 0xa0> kSystemstack126 = {
    0x55, 0x48, 0x89, 0xe5, 0x48, 0x8b, 0x7c, 0x24, 0x10, 0x64, 0x48, 0x8b, 0x04, 0x25, 0xf8, 0xff,
    0xff, 0xff, 0x48, 0x8b, 0x58, 0x30, 0x48, 0x3b, 0x43, 0x48, 0x74, 0x65, 0x48, 0x8b, 0x13, 0x48,
    0x39, 0xd0, 0x74, 0x5d, 0x48, 0x3b, 0x83, 0xb8, 0x00, 0x00, 0x00, 0x75, 0x5d, 0xe8, 0xae, 0xf2,
    0xff, 0xff, 0x64, 0x48, 0x89, 0x14, 0x25, 0xf8, 0xff, 0xff, 0xff, 0x49, 0x89, 0xd6, 0x48, 0x8b,
    0x62, 0x38, 0x48, 0x89, 0xfa, 0x48, 0x8b, 0x3f, 0xff, 0xd7, 0x64, 0x48, 0x8b, 0x04, 0x25, 0xf8,
    0xff, 0xff, 0xff, 0x48, 0x8b, 0x58, 0x30, 0x48, 0x8b, 0x83, 0xb8, 0x00, 0x00, 0x00, 0x64, 0x48,
    0x89, 0x04, 0x25, 0xf8, 0xff, 0xff, 0xff, 0x48, 0x8b, 0x60, 0x38, 0x48, 0x8b, 0x68, 0x60, 0x48,
    0xc7, 0x40, 0x38, 0x00, 0x00, 0x00, 0x00, 0x48, 0xc7, 0x40, 0x60, 0x00, 0x00, 0x00, 0x00, 0x5d,
    0xc3, 0x48, 0x89, 0xfa, 0x48, 0x8b, 0x3f, 0x5d, 0xff, 0xe7, 0x48, 0x8d, 0x05, 0x6f, 0x3e, 0x00,
    0x00, 0xff, 0xd0, 0xcd, 0x03, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc,
};

TEST(GoCgoSwitches, CurrentReleaseSystemstack) {
  constexpr uint64_t kEntry = 0x48b9e0;
  go::FrameLayout layout;
  layout.sp = {{kEntry, kEntry + 1, 0}, {kEntry + 1, kEntry + 0x80, 8}};
  const std::vector<CgoSwitch> found =
      go::find_cgo_switches("runtime.systemstack.abi0", kEntry, kSystemstack126, layout);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].kind, CgoSwitchKind::kSystemStack);
  EXPECT_EQ(found[0].return_address, 0x48ba2au);
  EXPECT_EQ(found[0].cfa_offset, 16);  // sched.sp + the popped rbp + the return address
  EXPECT_TRUE(found[0].rbp_saved);
  EXPECT_EQ(found[0].slot, -8);
  EXPECT_EQ(found[0].curg_offset, 0xb8u);
  // Cut before its `ret`: not a way back it knows.
  EXPECT_TRUE(go::find_cgo_switches("runtime.systemstack", kEntry,
                                    std::span(kSystemstack126).first(0x7f), layout)
                  .empty());
}

bool cgo_fixture_missing() {
  if (std::filesystem::exists(go_fixture("go_cgo"))) return false;
  const char* ci = std::getenv("CI");
  if (ci && std::string(ci) == "true") ADD_FAILURE() << "the cgo fixture was not built";
  return true;
}

// Go 1.19 (asm_amd64.s): asmcgocall keeps g at 48(%rsp) and the depth at 40(%rsp), its sp at
// entry in rdx (delta 0); cgocallback's frame is 32 bytes with rbp at its top, g at fs - 8.
TEST(GoCgoSwitches, Go119RowsInTheUnwindTable) {
  if (cgo_fixture_missing()) GTEST_SKIP() << "no cgo fixture (go or gcc missing)";
  const UnwindTableResult result = build_unwind_table(go_fixture("go_cgo"));
  ASSERT_TRUE(std::holds_alternative<UnwindTable>(result));
  const std::vector<UnwindRow>& rows = std::get<UnwindTable>(result).rows;
  std::vector<const UnwindRow*> calls, callbacks;
  for (const UnwindRow& row : rows) {
    if (row.cfa_rule == BPFPROF_CFA_GO_CGO_CALL) calls.push_back(&row);
    if (row.cfa_rule == BPFPROF_CFA_GO_CGO_CALLBACK) callbacks.push_back(&row);
  }
  ASSERT_EQ(calls.size(), 2u);
  for (const UnwindRow* row : calls) {
    EXPECT_EQ(row->cfa_offset, 8);
    EXPECT_EQ(row->rbx_offset, 40);
    EXPECT_EQ(row->rbp_rule, BPFPROF_RBP_SAME);
    // One byte: the call's last, where a return address is looked up; then root again.
    const UnwindRow* next = find_unwind_row(rows, row->pc + 1);
    ASSERT_NE(next, nullptr);
    EXPECT_EQ(next->cfa_rule, BPFPROF_CFA_ROOT);
  }
  // Go 1.19's systemstack returns to curg.sched.sp with `ret` (m.curg at 0xc0): one row.
  const std::vector<UnwindRow>* cpu_rows = nullptr;
  const UnwindTableResult cpu = build_unwind_table(go_fixture("go_cpu"));
  ASSERT_NE(cpu_rows = std::get_if<UnwindTable>(&cpu) ? &std::get<UnwindTable>(cpu).rows : nullptr,
            nullptr);
  // morestack's call of newstack goes back the same way, to curg.sched.sp itself (the sp of
  // the function that grows its stack, its return address just below), rbp not known.
  size_t systemstacks = 0, morestacks = 0;
  for (const UnwindRow& row : *cpu_rows) {
    if (row.cfa_rule != BPFPROF_CFA_GO_SYSTEMSTACK) continue;
    EXPECT_EQ(row.rbx_offset, -8);
    EXPECT_EQ(row.go_m_curg_words, 0xc0 / 8);
    if (row.cfa_offset == 0) {
      ++morestacks;
      EXPECT_EQ(row.rbp_rule, BPFPROF_RBP_UNKNOWN);
      continue;
    }
    ++systemstacks;
    EXPECT_EQ(row.cfa_offset, 8);
    EXPECT_EQ(row.rbp_rule, BPFPROF_RBP_SAME);
  }
  EXPECT_EQ(systemstacks, 1u);
  EXPECT_EQ(morestacks, 1u);
  ASSERT_EQ(callbacks.size(), 1u);
  EXPECT_EQ(callbacks[0]->cfa_offset, 40);
  EXPECT_EQ(callbacks[0]->rbx_offset, -8);
  EXPECT_EQ(callbacks[0]->rbp_rule, BPFPROF_RBP_AT_CFA);
  EXPECT_EQ(callbacks[0]->rbp_offset, -16);
}

// Go 1.24's morestack (docker's) from its switch: m.g0 into rbx, g = g0 (`mov %rbx,%fs:(%rcx)`),
// sp and rbp from g0.sched, `call newstack`, `call abort`, `ret`.
constexpr std::array<uint8_t, 23> kMorestackTail124 = {
    0x48, 0x8b, 0x1b, 0x64, 0x48, 0x89, 0x19, 0x48, 0x8b, 0x63, 0x38, 0x48,
    0x8b, 0x6b, 0x68, 0xe8, 0x29, 0x49, 0x00, 0x00, 0xe8, 0x04, 0xc3};

TEST(GoCgoSwitches, CurrentReleaseMorestackTakesSystemstacksSlotAndCurg) {
  constexpr uint64_t kEntry = 0x4a33c3;
  go::FrameLayout layout;
  layout.sp = {{kEntry, kEntry + kMorestackTail124.size(), 0}};
  CgoSwitch systemstack{CgoSwitchKind::kSystemStack, 0x4a3000, 8, true, -8, 0xb8};
  const std::vector<CgoSwitch> found = go::find_cgo_switches(
      "runtime.morestack.abi0", kEntry, kMorestackTail124, layout, &systemstack);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].kind, CgoSwitchKind::kSystemStack);
  EXPECT_EQ(found[0].return_address, kEntry + 20);  // past `call newstack`
  EXPECT_EQ(found[0].cfa_offset, 0);
  EXPECT_TRUE(found[0].rbp_lost);
  EXPECT_EQ(found[0].slot, -8);
  EXPECT_EQ(found[0].curg_offset, 0xb8u);
  // Without the binary's systemstack switch, or cut before the call, nothing.
  EXPECT_TRUE(
      go::find_cgo_switches("runtime.morestack", kEntry, kMorestackTail124, layout).empty());
  EXPECT_TRUE(go::find_cgo_switches("runtime.morestack", kEntry,
                                    std::span(kMorestackTail124).first(16), layout, &systemstack)
                  .empty());
}

}  // namespace
}  // namespace bpfprof
