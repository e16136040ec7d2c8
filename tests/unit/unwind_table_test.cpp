// The compact unwind tables (symbols/dwarf/unwind_table.h) against libdw's own reading of
// the call-frame information, address by address, on this machine's libc, libstdc++ and
// python3.11; the special rows on the fixtures; the coverage of .text.
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <fcntl.h>
#include <gelf.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <set>
#include <string>

#include "symbols/dwarf/cfi_functions.h"
#include "symbols/dwarf/crt_stubs.h"
#include "symbols/dwarf/dwarf_module.h"
#include "symbols/dwarf/unwind_table.h"
#include "symbols/dwarf/v8_builtins.h"
#include "symbols/elf/elf_file.h"
#include "symbols/util/unique_handle.h"
#include "tests/unit/test_helpers.h"

namespace bpfprof {
namespace {

using testing_helpers::kBigFrame;
using testing_helpers::kPltLoop;

using testing_helpers::ElfCloser;

using testing_helpers::kLibc;
using testing_helpers::table_of;

const char* const kLibstdcxx = "/usr/lib/x86_64-linux-gnu/libstdc++.so.6";
const char* const kPython = "/usr/bin/python3.11";
const char* const kLoader = "/lib64/ld-linux-x86-64.so.2";

// ---- The reference: libdw's rules spelled out as text, then read as a table row would be.

std::string op_text(const Dwarf_Op& op) {
  const auto sign = [](Dwarf_Word w) { return std::to_string(static_cast<int64_t>(w)); };
  if (op.atom == DW_OP_bregx) return "r" + std::to_string(op.number) + "+" + sign(op.number2);
  if (op.atom >= DW_OP_breg0 && op.atom <= DW_OP_breg31)
    return "r" + std::to_string(op.atom - DW_OP_breg0) + "+" + sign(op.number);
  if (op.atom == DW_OP_call_frame_cfa) return "cfa";
  if (op.atom == DW_OP_regx) return "in r" + std::to_string(op.number);
  if (op.atom == DW_OP_plus_uconst) return "+" + sign(op.number);
  return "op" + std::to_string(op.atom);
}

std::string ops_text(const Dwarf_Op* ops, size_t count) {
  std::string text;
  for (size_t i = 0; i < count; ++i) text += (i ? " " : "") + op_text(ops[i]);
  return text;
}

std::string register_text(Dwarf_Frame* frame, int regno) {
  Dwarf_Op mem[3];
  Dwarf_Op* ops = nullptr;
  size_t count = 0;
  if (dwarf_frame_register(frame, regno, mem, &ops, &count) != 0) return "error";
  if (count == 0) return ops == nullptr ? "same" : "undefined";
  return ops_text(ops, count);
}

// " rbp=same", " rbx@-16" or " rbp=?": how the caller's register `name` (DWARF `regno`) is found.
std::string saved_text(Dwarf_Frame* frame, int regno, const std::string& name) {
  const std::string rule = register_text(frame, regno);
  // elfutils' ABI defaults mark rax, not rbx, callee-saved (backends/x86_64_cfi.c); the table
  // follows the ABI.
  if (rule == "same" || (regno == 3 && rule == "undefined")) return " " + name + "=same";
  if (rule == "cfa") return " " + name + "@0";
  if (rule.rfind("cfa +", 0) == 0) return " " + name + "@" + rule.substr(5);
  return " " + name + "=?";
}

std::string saved_text(uint8_t rule, int16_t offset, const std::string& name) {
  if (rule == BPFPROF_RBP_SAME) return " " + name + "=same";
  if (rule == BPFPROF_RBP_AT_CFA) return " " + name + "@" + std::to_string(offset);
  return " " + name + "=?";
}

// "rsp+16 rbp=same rbx@-24", "plt+8 rbp@-16 rbx=same", "root", "signal" or "unknown", from
// libdw at `pc`.
std::string expected_rule(Dwarf_CFI* cfi, uint64_t pc) {
  Dwarf_Frame* frame = nullptr;
  if (dwarf_cfi_addrframe(cfi, pc, &frame) != 0) return "unknown";
  std::unique_ptr<Dwarf_Frame, decltype(&free)> owner(frame, &free);
  Dwarf_Addr start, end;
  bool signal = false;
  dwarf_frame_info(frame, &start, &end, &signal);
  if (signal) return "signal";
  const std::string ra = register_text(frame, 16);
  if (ra == "undefined") return "root";
  Dwarf_Op* ops = nullptr;
  size_t count = 0;
  // vfork keeps it in rdi (r5) for a few instructions; the table follows that with rsp only.
  const bool in_rdi = ra == "in r5";
  if ((ra != "cfa +-8" && !in_rdi) || dwarf_frame_cfa(frame, &ops, &count) != 0) return "unknown";
  std::string cfa = ops_text(ops, count);
  // binutils' PLT expression: DW_OP_breg7 8, breg16 0, lit15, and, lit11, ge, lit3, shl, plus.
  if (cfa == "r7+8 r16+0 op63 op26 op59 op42 op51 op36 op34" && !in_rdi)
    cfa = "plt+8";
  else if (cfa.rfind("r7+", 0) == 0 && cfa.find(' ') == std::string::npos)
    cfa.replace(0, 2, "rsp");
  else if (cfa.rfind("r6+", 0) == 0 && cfa.find(' ') == std::string::npos && !in_rdi)
    cfa.replace(0, 2, "rbp");
  else if (cfa.rfind("r3+", 0) == 0 && cfa.find(' ') == std::string::npos && !in_rdi)
    cfa.replace(0, 2, "rbx");
  else
    return "unknown";
  if (in_rdi) cfa += " ra=rdi";
  return cfa + saved_text(frame, 6, "rbp") + saved_text(frame, 3, "rbx");
}

std::string row_text(const UnwindRow* row) {
  if (row == nullptr) return "unknown";
  std::string cfa;
  switch (row->cfa_rule) {
    case BPFPROF_CFA_RSP:
      cfa = "rsp+";
      break;
    case BPFPROF_CFA_RBP:
      cfa = "rbp+";
      break;
    case BPFPROF_CFA_PLT:
      cfa = "plt+";
      break;
    case BPFPROF_CFA_ROOT:
      return "root";
    case BPFPROF_CFA_SIGNAL:
      return "signal";
    case BPFPROF_CFA_RSP_RETURN_IN_RDI:
      cfa = "rsp+";
      break;
    case BPFPROF_CFA_RBX:
      cfa = "rbx+";
      break;
    case BPFPROF_CFA_GO_CGO_CALL:
      cfa = "goroutine+";
      break;
    case BPFPROF_CFA_GO_CGO_CALLBACK:
      cfa = "g0+";
      break;
    default:
      return "unknown";
  }
  cfa += std::to_string(row->cfa_offset);
  if (row->cfa_rule == BPFPROF_CFA_RSP_RETURN_IN_RDI) cfa += " ra=rdi";
  return cfa + saved_text(row->rbp_rule, row->rbp_offset, "rbp") +
         saved_text(row->rbx_rule, row->rbx_offset, "rbx");
}

// Where no CFI covers a crt stub (.init, .fini), its rule from the bytes (crt_stubs_test).
std::string stub_rule(const std::vector<CrtStub>& stubs, uint64_t pc) {
  const CrtStub* stub = find_crt_stub(stubs, pc);
  return stub ? "rsp+" + std::to_string(stub->cfa_offset_at(pc)) + " rbp=same rbx=same" : "unknown";
}

// Every `stride`th address of every executable section, and both sides of every `row_step`th
// row boundary. Returns how many of them fell in crt stubs that the CFI does not cover.
size_t expect_table_agrees_with_libdw(const std::string& path, uint64_t stride = 7,
                                      size_t row_step = 1) {
  const UnwindTable table = table_of(path);
  if (table.rows.empty()) {
    ADD_FAILURE() << path << ": no rows";
    return 0;
  }
  elf_version(EV_CURRENT);
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  std::unique_ptr<Elf, ElfCloser> elf(elf_begin(fd.get(), ELF_C_READ_MMAP, nullptr));
  Dwarf_CFI* cfi = dwarf_getcfi_elf(elf.get());
  if (cfi == nullptr) {
    ADD_FAILURE() << path << ": no CFI";
    return 0;
  }
  // .debug_frame where .eh_frame has no FDE (the table reads both).
  std::unique_ptr<Dwarf, decltype(&dwarf_end)> dwarf(
      dwarf_begin_elf(elf.get(), DWARF_C_READ, nullptr), &dwarf_end);
  Dwarf_CFI* debug_cfi = dwarf ? dwarf_getcfi(dwarf.get()) : nullptr;
  std::vector<uint64_t> pcs;
  for (const SectionCoverage& section : table.coverage)
    for (uint64_t pc = section.start; pc < section.end; pc += stride) pcs.push_back(pc);
  for (size_t i = 0; i < table.rows.size(); i += row_step)
    pcs.insert(pcs.end(), {table.rows[i].pc - 1u, table.rows[i].pc});
  const std::vector<CrtStub> stubs = find_crt_stubs(elf.get());
  const std::optional<EntryStub> entry = entry_stub(elf.get());
  const std::optional<V8EmbeddedCode> v8_builtins = find_v8_embedded_code(elf.get());
  size_t mismatches = 0;
  size_t in_stubs = 0;
  for (uint64_t pc : pcs) {
    std::string expected = expected_rule(cfi, pc);
    if (expected == "unknown" && debug_cfi != nullptr) expected = expected_rule(debug_cfi, pc);
    if (expected == "unknown" && find_crt_stub(stubs, pc)) {
      expected = stub_rule(stubs, pc);
      ++in_stubs;
    }
    const std::string actual = row_text(find_unwind_row(table.rows, pc));
    if (expected == actual) continue;
    // No CFI there: the rules read from the code (stack_height_test checks them).
    if (expected == "unknown" && actual.starts_with("rsp+")) continue;
    // ld.so's _start, without CFI: a thread root (DynamicLoaderEntryStubIsARoot).
    if (expected == "unknown" && actual == "root" && entry && entry->contains(pc)) continue;
    // V8's builtins, without CFI: by frame pointers (V8UnwindTable.NodesBuiltinsAreCovered).
    if (expected == "unknown" && actual == "rbp+16 rbp@-16 rbx=?" && v8_builtins &&
        pc >= v8_builtins->start && pc < v8_builtins->end)
      continue;
    if (++mismatches <= 10)
      ADD_FAILURE() << path << " at 0x" << std::hex << pc << ": libdw " << expected << ", table "
                    << actual;
  }
  EXPECT_EQ(mismatches, 0u) << path << ": " << pcs.size() << " addresses checked";
  dwarf_cfi_end(cfi);
  return in_stubs;
}

// libc has no .init or .fini; libstdc++'s and python's come from crti.o and crtn.o.
TEST(UnwindTable, LibcAgreesWithLibdwAtEveryCheckedAddress) {
  expect_table_agrees_with_libdw(kLibc);
}
TEST(UnwindTable, LibstdcxxAgreesWithLibdwAtEveryCheckedAddress) {
  EXPECT_GT(expect_table_agrees_with_libdw(kLibstdcxx), 0u);
}
TEST(UnwindTable, Python311AgreesWithLibdwAtEveryCheckedAddress) {
  EXPECT_GT(expect_table_agrees_with_libdw(kPython), 0u);
}
// With the lazy-binding trampolines, whose CFA is rbx + 32 (see LazyBindingTrampolines...).
TEST(UnwindTable, DynamicLoaderAgreesWithLibdwAtEveryCheckedAddress) {
  expect_table_agrees_with_libdw(kLoader);
}

// A program whose own functions have CFI in .debug_frame only (crt's have .eh_frame).
TEST(UnwindTable, DebugFrameAgreesWithLibdwAtEveryCheckedAddress) {
  const std::string fixture = std::string(TEST_FIXTURE_DIR) + "/debug_frame_recursion";
  expect_table_agrees_with_libdw(fixture, 1, 1);
  const std::unique_ptr<DwarfModule> module = DwarfModule::open(fixture, {});
  ASSERT_NE(module, nullptr);
  std::vector<CodeRange> debug_only;
  const std::vector<CodeRange> eh = read_cfi_functions(module->elf(), CfiSection::kEhFrame);
  for (const CodeRange& range : read_cfi_functions(module->elf(), CfiSection::kDebugFrame))
    if (!find_code_range(eh, range.start)) debug_only.push_back(range);
  ASSERT_GE(debug_only.size(), 3u) << "main, recurse and bottom_spin from .debug_frame only";
  const UnwindTable table = table_of(fixture);
  for (const CodeRange& range : debug_only) {
    const UnwindRow* row = find_unwind_row(table.rows, range.start);
    ASSERT_NE(row, nullptr);
    EXPECT_EQ(row_text(row), "rsp+8 rbp=same rbx=same") << std::hex << range.start;
  }
}

// The same program with its CFI in a separate debug file whose sections are compressed, as
// Debian's *-dbg packages ship them: .debug_frame is read from it (decompressed alone, its
// DWARF not opened), giving the rows the unsplit program gives.
TEST(UnwindTable, DebugFrameOfACompressedSeparateDebugFile) {
  const std::string dir = TEST_FIXTURE_DIR;
  const std::string split = dir + "/debug_frame_split";
  ASSERT_NE(elf_version(EV_CURRENT), EV_NONE);
  const UniqueFd debug_fd(::open((dir + "/symdir/debug_frame_split.debug").c_str(), O_RDONLY));
  ASSERT_TRUE(debug_fd.valid());
  const std::unique_ptr<Elf, decltype(&elf_end)> debug(
      elf_begin(debug_fd.get(), ELF_C_READ_MMAP, nullptr), &elf_end);
  ASSERT_NE(debug, nullptr);
  bool compressed = false;
  for (Elf_Scn* scn = elf_nextscn(debug.get(), nullptr); scn; scn = elf_nextscn(debug.get(), scn)) {
    GElf_Shdr header;
    size_t names = 0;
    if (gelf_getshdr(scn, &header) && elf_getshdrstrndx(debug.get(), &names) == 0 &&
        std::string(elf_strptr(debug.get(), names, header.sh_name)) == ".debug_frame")
      compressed = (header.sh_flags & SHF_COMPRESSED) != 0;
  }
  ASSERT_TRUE(compressed) << "the fixture's .debug_frame is not compressed";
  UnwindTableOptions options;
  options.symbol_dirs = {dir + "/symdir"};
  const UnwindTableResult found = build_unwind_table(split, options);
  ASSERT_TRUE(std::holds_alternative<UnwindTable>(found));
  const std::vector<UnwindRow>& rows = std::get<UnwindTable>(found).rows;
  const UnwindTable whole = table_of(dir + "/debug_frame_recursion");
  ASSERT_EQ(rows.size(), whole.rows.size());
  for (size_t i = 0; i < rows.size(); ++i)
    EXPECT_EQ(std::to_string(rows[i].pc) + " " + row_text(&rows[i]),
              std::to_string(whole.rows[i].pc) + " " + row_text(&whole.rows[i]));
  // Without the debug file, the program's own functions have no rows: the file was read.
  EXPECT_LT(table_of(split).rows.size(), rows.size());
}

// The biggest files met, from other compilers: LLVM's (lld, .eh_frame typed
// SHT_X86_64_UNWIND) and node's (GCC, with V8's builtins), sampled more sparsely.
TEST(UnwindTable, LibLLVMAgreesWithLibdwAtCheckedAddresses) {
  const char* const llvm = "/usr/lib/x86_64-linux-gnu/libLLVM-14.so.1";
  if (access(llvm, R_OK) != 0) GTEST_SKIP() << llvm << " is not installed";
  expect_table_agrees_with_libdw(llvm, 997, 13);
}
TEST(UnwindTable, NodeAgreesWithLibdwAtCheckedAddresses) {
  if (access("/usr/bin/node", R_OK) != 0) GTEST_SKIP() << "node is not installed";
  expect_table_agrees_with_libdw("/usr/bin/node", 997, 13);
}

// ---- Coverage of .text: at least 99.9% of its code (padding between functions left out).

void expect_text_covered(const std::string& path) {
  const UnwindTable table = table_of(path);
  const std::unique_ptr<DwarfModule> module = DwarfModule::open(path, {});
  ASSERT_NE(module, nullptr);
  for (const SectionCoverage& section : table.coverage) {
    if (section.name != ".text") continue;
    const double share = double(section.covered_bytes) / double(section.code_bytes());
    std::printf("%s .text: %.4f%% of %lu code bytes covered (%lu bytes of padding left out)\n",
                path.c_str(), 100 * share, section.code_bytes(), section.padding_bytes);
    for (size_t gap = 0; gap < kUnwindGapKinds; ++gap)
      if (section.uncovered_bytes[gap] != 0)
        std::printf("  not covered: %lu bytes, %s\n", section.uncovered_bytes[gap],
                    unwind_gap_name(static_cast<UnwindGap>(gap)));
    // The UNKNOWN rows inside a named function (padding has no symbol).
    for (size_t i = 0; i + 1 < table.rows.size(); ++i) {
      const UnwindRow& row = table.rows[i];
      if (is_usable(row) || row.pc < section.start || row.pc >= section.end) continue;
      if (const Symbol* symbol = module->symbol_at(row.pc))
        std::printf("  0x%x..0x%x in %s\n", row.pc, table.rows[i + 1].pc, symbol->name.c_str());
    }
    EXPECT_GE(share, 0.999) << path;
    return;
  }
  ADD_FAILURE() << path << " has no .text";
}

TEST(UnwindTable, CoversLibcText) { expect_text_covered(kLibc); }
TEST(UnwindTable, CoversLibstdcxxText) { expect_text_covered(kLibstdcxx); }
TEST(UnwindTable, CoversPython311Text) { expect_text_covered(kPython); }

// ---- Special rows on known code.

const SectionCoverage* section_named(const UnwindTable& table, std::string_view name) {
  for (const SectionCoverage& section : table.coverage)
    if (section.name == name) return &section;
  return nullptr;
}

const Symbol* symbol_named(const ElfFile& elf, std::string_view name) {
  for (const Symbol& symbol : elf.symbols())
    if (symbol.name == name) return &symbol;
  return nullptr;
}

TEST(UnwindTable, PltEntriesGetThePltRule) {
  const UnwindTable table = table_of(kPltLoop);
  const SectionCoverage* plt = section_named(table, ".plt");
  ASSERT_NE(plt, nullptr);
  ASSERT_GE(plt->end - plt->start, 32u);  // PLT0 and labs@plt at least
  for (uint64_t pc = plt->start + 16; pc < plt->end; ++pc) {
    const UnwindRow* row = find_unwind_row(table.rows, pc);
    ASSERT_NE(row, nullptr);
    EXPECT_EQ(row->cfa_rule, BPFPROF_CFA_PLT) << std::hex << pc;
    EXPECT_EQ(row->cfa_offset, 8);
  }
  // PLT0 pushes once: sp + 16, then sp + 24.
  EXPECT_EQ(find_unwind_row(table.rows, plt->start)->cfa_offset, 16);
  EXPECT_EQ(find_unwind_row(table.rows, plt->start + 6)->cfa_offset, 24);
}

TEST(UnwindTable, StartIsARoot) {
  const UnwindTable table = table_of(kPltLoop);
  const std::unique_ptr<ElfFile> elf = ElfFile::open(kPltLoop, nullptr);
  ASSERT_NE(elf, nullptr);
  const Symbol* start = symbol_named(*elf, "_start");
  ASSERT_NE(start, nullptr);
  const UnwindRow* row = find_unwind_row(table.rows, start->address + 4);
  ASSERT_NE(row, nullptr);
  EXPECT_EQ(row->cfa_rule, BPFPROF_CFA_ROOT);
  const Symbol* main_function = symbol_named(*elf, "main");
  ASSERT_NE(main_function, nullptr);
  EXPECT_EQ(find_unwind_row(table.rows, main_function->address)->cfa_rule, BPFPROF_CFA_RSP);
}

// The dynamic loader's _start has no CFI: it calls _dl_start, whose return address is
// _dl_start_user, where ld.so runs the libraries' constructors (_dl_init). Without a row
// there, every sample of a process's constructors fell back to a stack copy.
TEST(UnwindTable, DynamicLoaderEntryStubIsARoot) {
  const char* const loader = kLoader;
  const UnwindTable table = table_of(loader);
  const std::unique_ptr<DwarfModule> module = DwarfModule::open(loader, {});
  ASSERT_NE(module, nullptr);
  const std::optional<EntryStub> stub = entry_stub(module->elf());
  ASSERT_TRUE(stub.has_value());
  ASSERT_EQ(module->cfi_function_at(stub->start), nullptr) << "ld.so's _start has CFI after all";
  for (uint64_t pc : {stub->start, stub->start + 8}) {  // _start; _dl_start's return address
    const UnwindRow* row = find_unwind_row(table.rows, pc);
    ASSERT_NE(row, nullptr);
    EXPECT_EQ(row->cfa_rule, BPFPROF_CFA_ROOT) << std::hex << pc;
    EXPECT_TRUE(module->is_thread_root(pc)) << "the userspace unwinder agrees";
  }
}

// The functions of `path` whose rows have `rule`, looked up `nudge` bytes into each row.
std::set<std::string> functions_with_rule(const std::string& path, const UnwindTable& table,
                                          uint8_t rule, uint64_t nudge = 0) {
  const std::unique_ptr<DwarfModule> module = DwarfModule::open(path, {});
  EXPECT_NE(module, nullptr);
  std::set<std::string> names;
  for (const UnwindRow& row : table.rows) {
    if (row.cfa_rule != rule || !module) continue;
    const Symbol* symbol = module->symbol_at(row.pc + nudge);
    names.insert(symbol != nullptr ? symbol->name : "?");
  }
  return names;
}

TEST(UnwindTable, LibcSignalTrampolineIsTheOnlySignalRow) {
  const UnwindTable table = table_of(kLibc);
  // The FDE starts a byte early.
  EXPECT_EQ(functions_with_rule(kLibc, table, BPFPROF_CFA_SIGNAL, 1),
            std::set<std::string>{"__restore_rt"});
}

// A shell's parent sits in vfork while its child runs up to the exec: vfork's return address
// is in rdi from its first instruction's pop to its push after the system call. Those rows,
// and only those, say so; without them every vfork's off-CPU stack fell back to a copy.
TEST(UnwindTable, LibcVforkHoldsItsReturnAddressInRdi) {
  const UnwindTable table = table_of(kLibc);
  const std::set<std::string> names =
      functions_with_rule(kLibc, table, BPFPROF_CFA_RSP_RETURN_IN_RDI);
  ASSERT_EQ(names.size(), 1u);
  const std::string vfork = *names.begin();
  EXPECT_NE(vfork.find("vfork"), std::string::npos) << vfork;
  // Its system call's return, where a vfork parent waits: pop rdi; mov eax, 58; syscall.
  // (After the push back, the CFI still names rdi, which holds it too: CFA sp + 8.)
  const std::unique_ptr<ElfFile> elf = ElfFile::open(kLibc, nullptr);
  ASSERT_NE(elf, nullptr);
  const Symbol* symbol = symbol_named(*elf, vfork);
  ASSERT_NE(symbol, nullptr);
  const UnwindRow* at_return = find_unwind_row(table.rows, symbol->address + 8);
  ASSERT_NE(at_return, nullptr);
  EXPECT_EQ(at_return->cfa_rule, BPFPROF_CFA_RSP_RETURN_IN_RDI);
  EXPECT_EQ(at_return->cfa_offset, 0);
}

// A program without BIND_NOW calls a library function the first time (every time under
// LD_BIND_NOT) through _dl_runtime_resolve_*, which keeps its frame in rbx while it saves the
// vector registers in an aligned area, then calls _dl_fixup: their CFA comes from rbx, and
// _dl_fixup and its callees say where they saved rbx. Without these rows a shell loop's samples
// there fall back to stack copies.
TEST(UnwindTable, LazyBindingTrampolinesHaveTheirCfaFromRbx) {
  const UnwindTable table = table_of(kLoader);
  const std::set<std::string> names = functions_with_rule(kLoader, table, BPFPROF_CFA_RBX);
  EXPECT_TRUE(names.contains("_dl_runtime_resolve_xsavec")) << names.size();
  for (const std::string& name : names) EXPECT_TRUE(name.starts_with("_dl_runtime_")) << name;
  size_t rbx_saved = 0;
  for (const UnwindRow& row : table.rows) rbx_saved += row.rbx_rule == BPFPROF_RBP_AT_CFA;
  EXPECT_GT(rbx_saved, 100u) << "rows that say where rbx is saved";
}

TEST(UnwindTable, TwentyKilobyteFrameHasItsLargeOffset) {
  const UnwindTable table = table_of(kBigFrame);
  const std::unique_ptr<ElfFile> elf = ElfFile::open(kBigFrame, nullptr);
  ASSERT_NE(elf, nullptr);
  const Symbol* big_frame = symbol_named(*elf, "big_frame");
  ASSERT_NE(big_frame, nullptr);
  int32_t largest = 0;
  for (uint64_t pc = big_frame->address; pc < big_frame->address + big_frame->size; ++pc) {
    const UnwindRow* row = find_unwind_row(table.rows, pc);
    ASSERT_NE(row, nullptr);
    ASSERT_EQ(row->cfa_rule, BPFPROF_CFA_RSP) << std::hex << pc;
    largest = std::max(largest, row->cfa_offset);
  }
  EXPECT_GT(largest, 20480);
}

TEST(UnwindTable, RowsAreSortedMergedAndClosed) {
  const UnwindTable table = table_of(kLibc);
  for (size_t i = 1; i < table.rows.size(); ++i) {
    const UnwindRow& a = table.rows[i - 1];
    const UnwindRow& b = table.rows[i];
    ASSERT_LT(a.pc, b.pc);
    const bool same = a.cfa_rule == b.cfa_rule && a.cfa_offset == b.cfa_offset &&
                      a.rbp_rule == b.rbp_rule && a.rbp_offset == b.rbp_offset &&
                      a.rbx_rule == b.rbx_rule && a.rbx_offset == b.rbx_offset;
    ASSERT_FALSE(same) << std::hex << b.pc;
  }
  EXPECT_EQ(table.rows.back().cfa_rule, BPFPROF_CFA_UNKNOWN);
  EXPECT_EQ(find_unwind_row(table.rows, 0), nullptr);
}

// A file with more rows, or more work, than a table may take gets none (its samples fall back
// to stack copies): libc, with bounds made small enough for it.
TEST(UnwindTable, StopsAtItsRowBound) {
  UnwindTableOptions options;
  options.max_rows = 1000;
  const UnwindTableResult result = build_unwind_table(kLibc, options);
  ASSERT_TRUE(std::holds_alternative<UnwindTableError>(result));
  EXPECT_EQ(std::get<UnwindTableError>(result), UnwindTableError::kTooManyRows);
  // Up to the bound, no error.
  options.max_rows = table_of(kLibc).rows.size();
  EXPECT_TRUE(std::holds_alternative<UnwindTable>(build_unwind_table(kLibc, options)));
}

TEST(UnwindTable, StopsAtItsTimeBound) {
  UnwindTableOptions options;
  options.time_limit = std::chrono::milliseconds(1);  // far less than libc's rows take
  const UnwindTableResult result = build_unwind_table(kLibc, options);
  ASSERT_TRUE(std::holds_alternative<UnwindTableError>(result));
  EXPECT_EQ(std::get<UnwindTableError>(result), UnwindTableError::kTooSlow);
}

// The default bounds leave the largest real file met alone.
TEST(UnwindTable, DefaultBoundsFitLibLLVM) {
  const char* const llvm = "/usr/lib/x86_64-linux-gnu/libLLVM-15.so.1";
  if (access(llvm, R_OK) != 0) GTEST_SKIP() << llvm << " is not installed";
  const UnwindTable table = table_of(llvm);
  EXPECT_GT(table.rows.size(), 500'000u);
  EXPECT_LT(table.rows.size() * 4, kMaxUnwindTableRows);
}

TEST(UnwindTable, RefusesWhatItCannotRead) {
  EXPECT_EQ(std::get<UnwindTableError>(build_unwind_table("/nonexistent/file")),
            UnwindTableError::kUnreadable);
  EXPECT_EQ(std::get<UnwindTableError>(build_unwind_table("/etc/passwd")),
            UnwindTableError::kUnreadable);
}

}  // namespace
}  // namespace bpfprof
