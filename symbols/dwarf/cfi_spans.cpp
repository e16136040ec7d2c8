#include "symbols/dwarf/cfi_spans.h"

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <libelf.h>

#include <algorithm>
#include <iterator>
#include <limits>
#include <memory>
#include <optional>

#include "symbols/dwarf/cfi_rows.h"
#include "symbols/dwarf/compact_unwind_table.h"

namespace bpfprof {
namespace {

// The rows that FDEs' programs make, reserved at once: a quarter of their bytes (and two per
// FDE) in every real file met (0.22-0.26 in libLLVM, libclang-cpp, node, libjvm, libc, Chromium),
// so a third leaves room for them and a few more rules without another copy of a large table.
uint64_t expected_rows(const std::vector<CfiFde>& fdes) {
  uint64_t bytes = 0;
  for (const CfiFde& fde : fdes) bytes += fde.program.size() + 2;
  return bytes / 3;
}

// binutils' x86-64 PLT CFA: sp + 8, plus 8 once the slot's push has run (offset 11 of 16).
// The IBT variant (.plt.sec) compares with 10 and is not what BPFPROF_CFA_PLT computes.
bool is_plt_expression(const std::vector<Dwarf_Op>& ops) {
  static constexpr uint8_t kAtoms[] = {DW_OP_breg7, DW_OP_breg16, DW_OP_lit15,
                                       DW_OP_and,   DW_OP_lit11,  DW_OP_ge,
                                       DW_OP_lit3,  DW_OP_shl,    DW_OP_plus};
  if (ops.size() != std::size(kAtoms)) return false;
  for (size_t i = 0; i < ops.size(); ++i)
    if (ops[i].atom != kAtoms[i]) return false;
  return ops[0].number == 8 && ops[1].number == 0;
}

// A CFA expression of one DW_OP_bregN or DW_OP_bregx: the same as a register rule.
std::optional<CfiCfa> single_register(const std::vector<Dwarf_Op>& ops) {
  if (ops.size() != 1) return std::nullopt;
  const Dwarf_Op& op = ops[0];
  if (op.atom == DW_OP_bregx)
    return CfiCfa{CfiCfa::Kind::kRegister, op.number, static_cast<int64_t>(op.number2), {}};
  if (op.atom >= DW_OP_breg0 && op.atom <= DW_OP_breg31)
    return CfiCfa{CfiCfa::Kind::kRegister,
                  static_cast<uint64_t>(op.atom - DW_OP_breg0),
                  static_cast<int64_t>(op.number),
                  {}};
  return std::nullopt;
}

// The CFA rule into `row`; the reason when the BPF walk cannot follow it.
std::optional<UnwindGap> classify_cfa(CfiCfa cfa, UnwindRow& row) {
  if (cfa.kind == CfiCfa::Kind::kUndefined) return UnwindGap::kUnreadableCfi;
  if (cfa.kind == CfiCfa::Kind::kExpression) {
    const std::optional<std::vector<Dwarf_Op>> ops = read_cfi_expression(cfa.expression);
    if (!ops) return UnwindGap::kCfaExpression;
    if (is_plt_expression(*ops)) {
      row.cfa_rule = BPFPROF_CFA_PLT;
      row.cfa_offset = static_cast<int32_t>((*ops)[0].number);
      return std::nullopt;
    }
    const std::optional<CfiCfa> simple = single_register(*ops);
    if (!simple) return UnwindGap::kCfaExpression;
    cfa = *simple;
  }
  if (cfa.reg != kDwarfRsp && cfa.reg != kDwarfRbp && cfa.reg != kDwarfRbx)
    return UnwindGap::kCfaRegister;
  if (!cfa.offset || *cfa.offset < std::numeric_limits<int32_t>::min() ||
      *cfa.offset > std::numeric_limits<int32_t>::max())
    return UnwindGap::kOffsetRange;
  row.cfa_rule = cfa.reg == kDwarfRsp   ? BPFPROF_CFA_RSP
                 : cfa.reg == kDwarfRbp ? BPFPROF_CFA_RBP
                                        : BPFPROF_CFA_RBX;
  row.cfa_offset = static_cast<int32_t>(*cfa.offset);
  return std::nullopt;
}

// How the caller's value of a callee-saved register (rbp, rbx) is found: enum bpfprof_rbp_rule.
// elfutils' x86-64 ABI defaults name rax where they mean rbx (backends/x86_64_cfi.c), so libdw
// says rbx is undefined until a function saves it; by the ABI it is callee-saved: unchanged.
void classify_saved(const CfiRegisterRule& saved, bool is_rbx, uint8_t& rule, int16_t& offset) {
  using Kind = CfiRegisterRule::Kind;
  rule = BPFPROF_RBP_UNKNOWN;
  if (saved.kind == Kind::kSame || (is_rbx && saved.kind == Kind::kUndefined)) {
    rule = BPFPROF_RBP_SAME;
  } else if (saved.kind == Kind::kAtCfa && saved.value >= std::numeric_limits<int16_t>::min() &&
             saved.value <= std::numeric_limits<int16_t>::max()) {
    rule = BPFPROF_RBP_AT_CFA;
    offset = static_cast<int16_t>(saved.value);
  }
}

// The row of one CFI row (start and end left to the caller).
UnwindSpan classify(const CfiRow& cfi, bool signal_frame) {
  using Kind = CfiRegisterRule::Kind;
  UnwindSpan span = unknown_span(0, 0, UnwindGap::kNoCfi);
  if (signal_frame) {
    span.row.cfa_rule = BPFPROF_CFA_SIGNAL;
    return span;
  }
  if (cfi.rip.kind == Kind::kUndefined) {
    span.row.cfa_rule = BPFPROF_CFA_ROOT;
    return span;
  }
  if (const std::optional<UnwindGap> gap = classify_cfa(cfi.cfa, span.row)) {
    return unknown_span(0, 0, *gap);
  }
  if (cfi.rip.kind == Kind::kInRegister && cfi.rip.value == kDwarfRdi &&
      span.row.cfa_rule == BPFPROF_CFA_RSP) {
    span.row.cfa_rule = BPFPROF_CFA_RSP_RETURN_IN_RDI;
  } else if (cfi.rip.kind != Kind::kAtCfa || cfi.rip.value != -8) {
    return unknown_span(0, 0, UnwindGap::kReturnAddress);
  }
  classify_saved(cfi.rbp, false, span.row.rbp_rule, span.row.rbp_offset);
  classify_saved(cfi.rbx, true, span.row.rbx_rule, span.row.rbx_offset);
  return span;
}

// The rows of `fde` (CFI addresses, `shift` above the file's), one span per CFI row, appended.
void add_fde_spans(const CfiFde& fde, uint64_t shift, std::vector<UnwindSpan>& spans,
                   UnwindBudget& budget) {
  if (budget.spent(spans.size())) return;
  const std::optional<uint64_t> unreadable_from = read_cfi_rows(fde, [&](const CfiRow& row) {
    UnwindSpan span = classify(row, fde.signal_frame);
    span.start = row.start - shift;
    span.end = row.end - shift;
    spans.push_back(span);
    return !budget.spent(spans.size());
  });
  if (unreadable_from)
    spans.push_back(
        unknown_span(*unreadable_from - shift, fde.range.end - shift, UnwindGap::kUnreadableCfi));
}

// An FDE's rows take an advance instruction of a byte each, but its first (and an unreadable
// rest): programs of fewer bytes than the row bound cannot pass it, as no real file's do. Past
// that (a crafted file), the rows are counted before any is kept, so that a file refused at
// the bound costs no memory. False when they do not fit.
bool rows_fit(const std::vector<CfiFde>& fdes, UnwindBudget& budget) {
  uint64_t most = 0;
  for (const CfiFde& fde : fdes) most += fde.program.size() + 2;
  if (most <= budget.max_rows()) return true;
  uint64_t rows = 0;
  for (const CfiFde& fde : fdes) {
    if (read_cfi_rows(fde, [&](const CfiRow&) { return !budget.spent(++rows); })) ++rows;
    if (budget.spent(rows)) return false;
  }
  return true;
}

// .eh_frame's spans, each FDE's range into `ranges`.
std::vector<UnwindSpan> eh_frame_spans(const DwarfModule::FrameFile& eh,
                                       std::vector<CodeRange>& ranges, UnwindBudget& budget) {
  std::vector<UnwindSpan> spans;
  if (eh.elf == nullptr) return spans;
  // In address order, so that the spans come sorted.
  const std::vector<CfiFde> fdes = read_fdes(eh.elf, CfiSection::kEhFrame);
  if (!rows_fit(fdes, budget)) return spans;
  spans.reserve(std::min(expected_rows(fdes), budget.max_rows()));
  for (const CfiFde& fde : fdes) {
    ranges.push_back(fde.range);
    add_fde_spans(fde, eh.cfi_minus_vaddr, spans, budget);
  }
  return spans;
}

// .debug_frame's spans where no range of `covered` (.eh_frame's, in the file's addresses) is.
void add_debug_frame_spans(const DwarfModule::FrameFile& debug,
                           const std::vector<CodeRange>& covered, std::vector<UnwindSpan>& spans,
                           UnwindBudget& budget) {
  const std::vector<CfiFde> fdes = read_fdes(debug.elf, CfiSection::kDebugFrame);
  if (!rows_fit(fdes, budget)) return;
  for (const CfiFde& fde : fdes) {
    if (budget.spent(spans.size())) return;
    const std::vector<CodeRange> parts = uncovered_parts(covered, fde.range);
    if (parts.empty()) continue;
    std::vector<UnwindSpan> rows;
    add_fde_spans(fde, 0, rows, budget);
    for (const CodeRange& part : parts) {  // the FDE's rows cut to the parts
      for (const UnwindSpan& row : rows) {
        const uint64_t start = std::max(row.start, part.start);
        const uint64_t end = std::min(row.end, part.end);
        if (start < end)
          spans.push_back(
              {start - debug.cfi_minus_vaddr, end - debug.cfi_minus_vaddr, row.row, row.gap});
      }
    }
  }
}

}  // namespace

std::vector<UnwindSpan> cfi_spans(const DwarfModule& module, UnwindBudget& budget) {
  const DwarfModule::FrameFile eh = module.frame_file(CfiSection::kEhFrame);
  std::vector<CodeRange> eh_ranges;
  std::vector<UnwindSpan> spans = eh_frame_spans(eh, eh_ranges, budget);
  if (budget.spent(spans.size())) return spans;
  const DwarfModule::FrameFile debug = module.frame_file(CfiSection::kDebugFrame);
  if (debug.elf == nullptr) return spans;
  // .eh_frame's ranges in the debug CFI's addresses, merged where they overlap.
  std::vector<CodeRange> covered;
  for (CodeRange range : eh_ranges) {
    range = {range.start - eh.cfi_minus_vaddr + debug.cfi_minus_vaddr,
             range.end - eh.cfi_minus_vaddr + debug.cfi_minus_vaddr};
    if (!covered.empty() && range.start <= covered.back().end)
      covered.back().end = std::max(covered.back().end, range.end);
    else
      covered.push_back(range);
  }
  add_debug_frame_spans(debug, covered, spans, budget);
  return spans;
}

std::optional<bpfprof_unwind_rule> function_body_rule(int fd, uint64_t vaddr) {
  if (elf_version(EV_CURRENT) == EV_NONE) return std::nullopt;
  const std::unique_ptr<Elf, decltype(&elf_end)> elf(elf_begin(fd, ELF_C_READ_MMAP, nullptr),
                                                     &elf_end);
  if (!elf || elf_kind(elf.get()) != ELF_K_ELF) return std::nullopt;
  const std::vector<CfiFde> fdes = read_fdes(elf.get(), CfiSection::kEhFrame);
  auto holds = [&](const CfiFde& fde) {
    return fde.range.start <= vaddr && vaddr < fde.range.end && fde.program_known;
  };
  const auto fde = std::find_if(fdes.begin(), fdes.end(), holds);
  if (fde == fdes.end()) return std::nullopt;
  std::optional<UnwindSpan> widest;
  read_cfi_rows(*fde, [&](const CfiRow& row) {
    UnwindSpan span = classify(row, fde->signal_frame);
    span.start = row.start;
    span.end = row.end;
    if (!widest || span.end - span.start > widest->end - widest->start) widest = span;
    return true;
  });
  // Code entered by jumps keeps the loop's sp, not an rbp of its own.
  if (!widest || widest->row.cfa_rule != BPFPROF_CFA_RSP) return std::nullopt;
  return rule_of(widest->row);
}

}  // namespace bpfprof
