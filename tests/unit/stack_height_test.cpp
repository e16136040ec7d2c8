// Rules read from code without CFI (symbols/dwarf/stack_height.h): crtstuff's function as
// Debian's gcc 12 builds it, what must be refused, and, as the hard test, every function of
// libc, libstdc++ and python3.11 read as if it had no CFI, against its CFI.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "symbols/dwarf/cfi_functions.h"
#include "symbols/dwarf/dwarf_module.h"
#include "symbols/dwarf/stack_height.h"
#include "symbols/dwarf/unwind_table.h"
#include "symbols/elf/elf_file.h"

namespace bpfprof {
namespace {

// __do_global_dtors_aux of /bin/date (Debian 12), at 0x3e70.
const std::vector<uint8_t> kDtorsAux = {
    0xf3, 0x0f, 0x1e, 0xfa,                          // endbr64
    0x80, 0x3d, 0x8d, 0x94, 0x01, 0x00, 0x00,        // cmpb $0,completed(%rip)
    0x75, 0x2b,                                      // jne 3ea8
    0x55,                                            // push %rbp
    0x48, 0x83, 0x3d, 0x42, 0x91, 0x01, 0x00, 0x00,  // cmpq $0,__cxa_finalize@GOT(%rip)
    0x48, 0x89, 0xe5,                                // mov %rsp,%rbp
    0x74, 0x0c,                                      // je 3e97
    0x48, 0x8b, 0x3d, 0x96, 0x93, 0x01, 0x00,        // mov __dso_handle(%rip),%rdi
    0xe8, 0xc9, 0xf5, 0xff, 0xff,                    // call __cxa_finalize@plt
    0xe8, 0x64, 0xff, 0xff, 0xff,                    // call deregister_tm_clones
    0xc6, 0x05, 0x65, 0x94, 0x01, 0x00, 0x01,        // movb $1,completed(%rip)
    0x5d,                                            // pop %rbp
    0xc3,                                            // ret
    0x0f, 0x1f, 0x00,                                // nopl (%rax)
    0xc3,                                            // ret (the jne's target)
};

const IsFunctionEntry kAnyEntry = [](uint64_t) { return true; };

// The span holding `pc`, or nullptr (alignment fill between functions gets none).
const InferredSpan* span_at(const std::vector<InferredSpan>& spans, uint64_t pc) {
  for (const InferredSpan& span : spans)
    if (pc >= span.start && pc < span.end) return &span;
  return nullptr;
}

bool same_spans(const std::vector<InferredSpan>& a, const std::vector<InferredSpan>& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](const auto& x, const auto& y) {
    return x.start == y.start && x.end == y.end && x.cfa_offset == y.cfa_offset && x.rbp == y.rbp &&
           x.rbp_offset == y.rbp_offset;
  });
}

// The builder reads every gap of a file with one reader: a range refused or read before leaves
// nothing behind for the next.
TEST(StackHeight, OneReaderReadsEachRangeAsAFreshOne) {
  const std::vector<uint8_t> refused = {0x48, 0x89, 0xc4, 0xc3};  // mov %rax,%rsp; ret
  const StackHeightReader reader;
  const std::vector<InferredSpan> alone =
      StackHeightReader().infer(0x3e70, kDtorsAux.data(), kDtorsAux.size(), kAnyEntry);
  ASSERT_FALSE(alone.empty());
  for (int round = 0; round < 3; ++round) {
    EXPECT_TRUE(reader.infer(0x1000, refused.data(), refused.size(), kAnyEntry).empty());
    EXPECT_TRUE(
        same_spans(reader.infer(0x3e70, kDtorsAux.data(), kDtorsAux.size(), kAnyEntry), alone));
  }
}

TEST(StackHeight, CrtstuffDtorsAux) {
  const std::vector<InferredSpan> spans =
      StackHeightReader().infer(0x3e70, kDtorsAux.data(), kDtorsAux.size(), kAnyEntry);
  struct Expected {
    uint64_t pc;
    uint32_t cfa_offset;
    InferredRbp rbp;
  };
  for (const Expected& e : {Expected{0x3e70, 8, InferredRbp::kSame},     // entry
                            Expected{0x3e7d, 8, InferredRbp::kSame},     // the push
                            Expected{0x3e7e, 16, InferredRbp::kSaved},   // after it
                            Expected{0x3e97, 16, InferredRbp::kSaved},   // a branch target
                            Expected{0x3ea3, 16, InferredRbp::kSaved},   // the pop
                            Expected{0x3ea4, 8, InferredRbp::kSame},     // ret
                            Expected{0x3ea8, 8, InferredRbp::kSame}}) {  // the jne's ret
    const InferredSpan* span = span_at(spans, e.pc);
    ASSERT_NE(span, nullptr) << std::hex << e.pc;
    EXPECT_EQ(span->cfa_offset, e.cfa_offset) << std::hex << e.pc;
    EXPECT_EQ(span->rbp, e.rbp) << std::hex << e.pc;
    if (e.rbp == InferredRbp::kSaved) {
      EXPECT_EQ(span->rbp_offset, -16);
    }
  }
  EXPECT_EQ(span_at(spans, 0x3ea5), nullptr);  // the nop between the two returns
}

TEST(StackHeight, RefusesWhatItCannotFollow) {
  auto none = [](std::vector<uint8_t> code) {
    return StackHeightReader().infer(0x1000, code.data(), code.size(), kAnyEntry).empty();
  };
  EXPECT_TRUE(none({0x53, 0xc3}));                    // push %rbx; ret: returns with rbx pushed
  EXPECT_TRUE(none({0x48, 0x83, 0xe4, 0xf0, 0xc3}));  // and $-16,%rsp
  EXPECT_TRUE(none({0x53, 0xff, 0xe0}));              // push %rbx; jmp *%rax (a jump table)
  EXPECT_TRUE(none({0x74, 0x02, 0x53, 0x5b, 0x53, 0xc3}));  // je to a state it does not have
  EXPECT_TRUE(none({0x48, 0x89, 0xc5, 0xc3}));              // mov %rax,%rbp; ret: rbp lost
  EXPECT_TRUE(none({0x0f, 0x0b, 0xff}));                    // ud2, then bytes that do not decode
  EXPECT_FALSE(none({0x53, 0x5b, 0xc3}));                   // push %rbx; pop %rbx; ret
  // A jump out of the code to what is not a function's entry: a cold part's way back.
  const std::vector<uint8_t> back = {0x5b, 0xe9, 0x00, 0x10, 0x00, 0x00};  // pop %rbx; jmp
  EXPECT_TRUE(StackHeightReader()
                  .infer(0x1000, back.data(), back.size(), [](uint64_t) { return false; })
                  .empty());
  const std::vector<uint8_t> tail = {0xe9, 0x00, 0x10, 0x00, 0x00};  // jmp: a tail call
  EXPECT_FALSE(StackHeightReader().infer(0x1000, tail.data(), tail.size(), kAnyEntry).empty());
  EXPECT_TRUE(StackHeightReader()
                  .infer(0x1000, tail.data(), tail.size(), [](uint64_t) { return false; })
                  .empty());
}

// Each FDE's function of a file read as if it had no CFI: wherever rules come out, they agree
// with the CFI's (rsp-based rows; rbp where the CFI says where it is saved).
void expect_agrees_with_cfi(const char* path) {
  auto module = DwarfModule::open(path, {});
  ASSERT_NE(module, nullptr) << path;
  UnwindTableResult result = build_unwind_table(path);
  ASSERT_TRUE(std::holds_alternative<UnwindTable>(result)) << path;
  const std::vector<UnwindRow>& rows = std::get<UnwindTable>(result).rows;
  size_t functions = 0, inferred = 0, compared = 0, disagreements = 0;
  std::string first;
  const StackHeightReader reader;  // as the builder reads a file's gaps
  for (const CodeRange& range : read_cfi_functions(module->elf(), CfiSection::kEhFrame)) {
    if (range.end - range.start > 64 * 1024) continue;
    ++functions;
    const std::vector<uint8_t> code =
        read_code_bytes(module->elf(), range.start, range.end - range.start);
    if (code.size() != range.end - range.start) continue;
    const IsFunctionEntry is_entry = [&rows](uint64_t address) {
      const UnwindRow* row = find_unwind_row(rows, address);
      return row != nullptr && (row->cfa_rule == BPFPROF_CFA_PLT ||
                                (row->cfa_rule == BPFPROF_CFA_RSP && row->cfa_offset == 8));
    };
    const std::vector<InferredSpan> spans =
        reader.infer(range.start, code.data(), code.size(), is_entry);
    if (!spans.empty()) ++inferred;
    for (const InferredSpan& span : spans) {
      for (uint64_t pc = span.start; pc < span.end; ++pc) {
        const UnwindRow* row = find_unwind_row(rows, pc);
        if (row == nullptr || row->cfa_rule != BPFPROF_CFA_RSP) continue;
        ++compared;
        // Where rbp is saved, both say the same slot (after the pop, gcc's CFI often keeps
        // the slot, which still holds the same value).
        bool agrees = static_cast<uint32_t>(row->cfa_offset) == span.cfa_offset;
        if (span.rbp == InferredRbp::kSaved)
          agrees =
              agrees && row->rbp_rule == BPFPROF_RBP_AT_CFA && span.rbp_offset == row->rbp_offset;
        if (!agrees && disagreements++ == 0) {
          char text[160];
          snprintf(text, sizeof text,
                   "pc %#llx: CFI CFA rsp+%d rbp rule %d at %d; read rsp+%u rbp %d at %d",
                   static_cast<unsigned long long>(pc), row->cfa_offset, row->rbp_rule,
                   row->rbp_offset, span.cfa_offset, static_cast<int>(span.rbp), span.rbp_offset);
          first = text;
        }
      }
    }
  }
  printf("%s: rules read for %zu of %zu functions; %zu addresses compared, %zu disagree%s%s\n",
         path, inferred, functions, compared, disagreements,
         first.empty() ? "" : "; first: ", first.c_str());
  EXPECT_GT(inferred, functions / 5) << "the reader follows too little to be tested";
  EXPECT_EQ(disagreements, 0u) << first;
}

TEST(StackHeight, LibcFunctionsAgreeWithTheirCfi) {
  expect_agrees_with_cfi("/lib/x86_64-linux-gnu/libc.so.6");
}
TEST(StackHeight, LibstdcxxFunctionsAgreeWithTheirCfi) {
  expect_agrees_with_cfi("/usr/lib/x86_64-linux-gnu/libstdc++.so.6");
}
TEST(StackHeight, Python311FunctionsAgreeWithTheirCfi) {
  expect_agrees_with_cfi("/usr/bin/python3.11");
}

}  // namespace
}  // namespace bpfprof
