#include "symbols/dwarf/unwind_table.h"

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <gelf.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <limits>
#include <memory>
#include <optional>
#include <utility>

#include "symbols/dwarf/cfi_functions.h"
#include "symbols/dwarf/cfi_rows.h"
#include "symbols/dwarf/crt_stubs.h"
#include "symbols/dwarf/dwarf_module.h"
#include "symbols/dwarf/stack_height.h"
#include "symbols/dwarf/v8_builtins.h"
#include "symbols/elf/elf_file.h"
#include "symbols/go/cgo_switches.h"
#include "symbols/go/pclntab.h"
#include "symbols/util/sorted_ranges.h"

namespace bpfprof {
namespace {

constexpr uint64_t kRowPcLimit = uint64_t{1} << 32;

std::chrono::nanoseconds thread_cpu_time() {
  timespec now{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return std::chrono::seconds(now.tv_sec) + std::chrono::nanoseconds(now.tv_nsec);
}

// The bounds of UnwindTableOptions, checked inside every loop of the build. The CPU clock is a
// system call (~400 ns) and a check can come every few nanoseconds (measure's loop): it is read
// once per 1,024 checks (none of which does more than a row's or an FDE's work), and the wall
// clock (vDSO, ~35 ns, 7% of libLLVM's build when read at every check) not at all.
class Budget {
 public:
  explicit Budget(const UnwindTableOptions& options)
      : max_rows_(options.max_rows), time_limit_(options.time_limit), start_(thread_cpu_time()) {}

  // Whether the build must stop, holding `rows` rows so far; once true, always true.
  bool spent(size_t rows = 0) {
    if (error_) return true;
    if (rows > max_rows_) {
      error_ = UnwindTableError::kTooManyRows;
    } else if (++checks_ % kChecksPerClockRead == 0 && thread_cpu_time() - start_ >= time_limit_) {
      error_ = UnwindTableError::kTooSlow;
    }
    return error_.has_value();
  }
  std::optional<UnwindTableError> error() const { return error_; }
  uint64_t max_rows() const { return max_rows_; }

 private:
  static constexpr uint64_t kChecksPerClockRead = 1024;
  uint64_t max_rows_;
  std::chrono::nanoseconds time_limit_;
  std::chrono::nanoseconds start_;
  uint64_t checks_ = 0;
  std::optional<UnwindTableError> error_;
};

// One CFI row (or a gap) in file virtual addresses; `gap` says why when the rule is UNKNOWN.
struct Span {
  uint64_t start = 0;
  uint64_t end = 0;
  UnwindRow row{};
  UnwindGap gap = UnwindGap::kNoCfi;
};

Span unknown_span(uint64_t start, uint64_t end, UnwindGap gap) {
  Span span{start, end, {}, gap};
  span.row.cfa_rule = BPFPROF_CFA_UNKNOWN;
  span.row.rbp_rule = BPFPROF_RBP_UNKNOWN;
  span.row.rbx_rule = BPFPROF_RBP_UNKNOWN;
  return span;
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
Span classify(const CfiRow& cfi, bool signal_frame) {
  using Kind = CfiRegisterRule::Kind;
  Span span = unknown_span(0, 0, UnwindGap::kNoCfi);
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
void add_fde_spans(const CfiFde& fde, uint64_t shift, std::vector<Span>& spans, Budget& budget) {
  if (budget.spent(spans.size())) return;
  const std::optional<uint64_t> unreadable_from = read_cfi_rows(fde, [&](const CfiRow& row) {
    Span span = classify(row, fde.signal_frame);
    span.start = row.start - shift;
    span.end = row.end - shift;
    spans.push_back(span);
    return !budget.spent(spans.size());
  });
  if (unreadable_from)
    spans.push_back(
        unknown_span(*unreadable_from - shift, fde.range.end - shift, UnwindGap::kUnreadableCfi));
}

// The parts of `range` that no range of `covered` (sorted, not overlapping) holds.
std::vector<CodeRange> uncovered_parts(const std::vector<CodeRange>& covered, CodeRange range) {
  std::vector<CodeRange> parts;
  auto it = std::upper_bound(covered.begin(), covered.end(), range.start,
                             [](uint64_t value, const CodeRange& r) { return value < r.start; });
  if (it != covered.begin()) --it;
  uint64_t from = range.start;
  for (; it != covered.end() && it->start < range.end; ++it) {
    if (it->end <= from) continue;
    if (it->start > from) parts.push_back({from, it->start});
    from = std::max(from, it->end);
  }
  if (from < range.end) parts.push_back({from, range.end});
  return parts;
}

// An FDE's rows take an advance instruction of a byte each, but its first (and an unreadable
// rest): programs of fewer bytes than the row bound cannot pass it, as no real file's do. Past
// that (a crafted file), the rows are counted before any is kept, so that a file refused at
// the bound costs no memory (8 M spans were ~630 MB). False when they do not fit.
bool rows_fit(const std::vector<CfiFde>& fdes, Budget& budget) {
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
std::vector<Span> eh_frame_spans(const DwarfModule::CallFrameInfo& eh,
                                 std::vector<CodeRange>& ranges, Budget& budget) {
  std::vector<Span> spans;
  if (eh.cfi == nullptr) return spans;
  // In address order, so that the spans come sorted.
  const std::vector<CfiFde> fdes = read_fdes(eh.elf, CfiSection::kEhFrame);
  if (!rows_fit(fdes, budget)) return spans;
  spans.reserve(fdes.size() * 5);  // ~5 rows an FDE in the files measured
  for (const CfiFde& fde : fdes) {
    ranges.push_back(fde.range);
    add_fde_spans(fde, eh.cfi_minus_vaddr, spans, budget);
  }
  return spans;
}

// .debug_frame's spans where no range of `covered` (.eh_frame's, in the file's addresses) is.
void add_debug_frame_spans(const DwarfModule::CallFrameInfo& debug,
                           const std::vector<CodeRange>& covered, std::vector<Span>& spans,
                           Budget& budget) {
  const std::vector<CfiFde> fdes = read_fdes(debug.elf, CfiSection::kDebugFrame);
  if (!rows_fit(fdes, budget)) return;
  for (const CfiFde& fde : fdes) {
    if (budget.spent(spans.size())) return;
    const std::vector<CodeRange> parts = uncovered_parts(covered, fde.range);
    if (parts.empty()) continue;
    std::vector<Span> rows;
    add_fde_spans(fde, 0, rows, budget);
    for (const CodeRange& part : parts) {  // the FDE's rows cut to the parts
      for (const Span& row : rows) {
        const uint64_t start = std::max(row.start, part.start);
        const uint64_t end = std::min(row.end, part.end);
        if (start < end)
          spans.push_back(
              {start - debug.cfi_minus_vaddr, end - debug.cfi_minus_vaddr, row.row, row.gap});
      }
    }
  }
}

// Spans from .eh_frame, then from .debug_frame where .eh_frame has no FDE.
std::vector<Span> collect_spans(const DwarfModule& module, Budget& budget) {
  const DwarfModule::CallFrameInfo eh = module.call_frame_info(CfiSection::kEhFrame);
  std::vector<CodeRange> eh_ranges;
  std::vector<Span> spans = eh_frame_spans(eh, eh_ranges, budget);
  if (budget.spent(spans.size())) return spans;
  const DwarfModule::CallFrameInfo debug = module.call_frame_info(CfiSection::kDebugFrame);
  if (debug.cfi == nullptr) return spans;
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

// The rules of the .init and .fini stubs that no FDE covers (symbols/dwarf/crt_stubs.h), after
// the CFI's spans: where .debug_frame has one starting at the same address, it wins.
void add_crt_stub_spans(Elf* elf, std::vector<Span>& spans) {
  for (const CrtStub& stub : find_crt_stubs(elf)) {
    for (auto [start, end] : {std::pair{stub.start, stub.body}, std::pair{stub.body, stub.ret},
                              std::pair{stub.ret, stub.end}}) {
      if (start >= end) continue;
      Span span{start, end, {}, UnwindGap::kNoCfi};
      span.row.cfa_rule = BPFPROF_CFA_RSP;
      span.row.cfa_offset = static_cast<int32_t>(stub.cfa_offset_at(start));
      span.row.rbp_rule = BPFPROF_RBP_SAME;
      span.row.rbx_rule = BPFPROF_RBP_SAME;  // .init and .fini move rsp only
      spans.push_back(span);
    }
  }
}

// A ROOT span over the entry point's stub when no CFI covers it (crt_stubs.h), up to the next
// span: the walk ends there as the userspace unwinder does (DwarfModule::is_thread_root).
void add_entry_stub_span(Elf* elf, std::vector<Span>& spans) {
  const std::optional<EntryStub> stub = entry_stub(elf);
  if (!stub) return;
  uint64_t end = stub->end;
  for (const Span& span : spans) {
    if (span.start <= stub->start && stub->start < span.end) return;
    if (span.start > stub->start) end = std::min(end, span.start);
  }
  Span span{stub->start, end, {}, UnwindGap::kNoCfi};
  span.row.cfa_rule = BPFPROF_CFA_ROOT;
  span.row.rbp_rule = BPFPROF_RBP_UNKNOWN;
  span.row.rbx_rule = BPFPROF_RBP_UNKNOWN;
  spans.push_back(span);
}

// The frame-pointer rule over the parts of `range` that no span covers: CFA = rbp + 16, the
// return address at CFA - 8, the caller's rbp at CFA - 16. At a function's first or last
// instructions rbp is still its caller's frame: the walk then goes on from the caller's
// caller, one frame short but on the same chain (as libdwfl's frame-pointer fallback does).
// rbx is not followed.
void add_frame_pointer_spans(CodeRange range, std::vector<Span>& spans) {
  std::vector<CodeRange> covered;
  for (const Span& span : spans)
    if (span.start < range.end && span.end > range.start) covered.push_back({span.start, span.end});
  std::sort(covered.begin(), covered.end(),
            [](const CodeRange& a, const CodeRange& b) { return a.start < b.start; });
  std::vector<CodeRange> merged;
  for (const CodeRange& part : covered) {
    if (!merged.empty() && part.start <= merged.back().end)
      merged.back().end = std::max(merged.back().end, part.end);
    else
      merged.push_back(part);
  }
  for (const CodeRange& part : uncovered_parts(merged, range)) {
    Span span{part.start, part.end, {}, UnwindGap::kNoCfi};
    span.row.cfa_rule = BPFPROF_CFA_RBP;
    span.row.cfa_offset = 16;
    span.row.rbp_rule = BPFPROF_RBP_AT_CFA;
    span.row.rbp_offset = -16;
    span.row.rbx_rule = BPFPROF_RBP_UNKNOWN;
    spans.push_back(span);
  }
}

// V8's embedded builtins (v8_builtins.h) where no CFI covers them: by frame pointers (no
// builtin's CFA is in rbx).
void add_v8_builtin_spans(Elf* elf, std::vector<Span>& spans) {
  if (const std::optional<V8EmbeddedCode> blob = find_v8_embedded_code(elf))
    add_frame_pointer_spans({blob->start, blob->end}, spans);
}

// A Go function's spans from Go's own pcsp table: CFA = sp + delta + 8. Go keeps the caller's
// rbp at CFA - 16 once the frame is set up, but the instruction between the sp change and the
// save is not told apart here: UNKNOWN beyond the entry, where no Go frame needs it. Where
// Go's traceback ends (a goroutine's or thread's first function, a switch of stacks), ROOT.
void add_go_function_spans(const go::FrameLayout& layout, std::vector<Span>& spans) {
  for (const go::SpDelta& sp : layout.sp) {
    Span span{sp.start, sp.end, {}, UnwindGap::kNoCfi};
    if (layout.end != go::TracebackEnd::kNo || sp.delta < 0) {
      span.row.cfa_rule = BPFPROF_CFA_ROOT;
      span.row.rbp_rule = BPFPROF_RBP_UNKNOWN;
    } else {
      span.row.cfa_rule = BPFPROF_CFA_RSP;
      span.row.cfa_offset = sp.delta + 8;
      span.row.rbp_rule = sp.delta == 0 ? BPFPROF_RBP_SAME : BPFPROF_RBP_UNKNOWN;
    }
    span.row.rbx_rule = BPFPROF_RBP_UNKNOWN;  // Go's calls preserve no register but rbp
    spans.push_back(span);
  }
}

static_assert(go::kGStackHi == BPFPROF_GO_G_STACK_HI && go::kGM == BPFPROF_GO_G_M &&
                  go::kMG0 == BPFPROF_GO_M_G0 && go::kGSchedSp == BPFPROF_GO_G_SCHED_SP,
              "the kernel walk reads Go's fields where the code was checked to");

// A cgo switch of stacks (symbols/go/cgo_switches.h) at its call's last byte, where the
// walk looks up a return address, cut out of the function's pcsp spans.
void add_cgo_switch_span(const go::CgoSwitch& cgo, std::vector<Span>& spans) {
  Span span{cgo.return_address - 1, cgo.return_address, {}, UnwindGap::kNoCfi};
  span.row.cfa_rule = cgo.kind == go::CgoSwitchKind::kCallIntoC        ? BPFPROF_CFA_GO_CGO_CALL
                      : cgo.kind == go::CgoSwitchKind::kCallbackIntoGo ? BPFPROF_CFA_GO_CGO_CALLBACK
                                                                       : BPFPROF_CFA_GO_SYSTEMSTACK;
  span.row.cfa_offset = cgo.cfa_offset;
  span.row.rbp_rule = cgo.rbp_saved ? BPFPROF_RBP_AT_CFA : BPFPROF_RBP_SAME;
  span.row.rbp_offset = cgo.rbp_saved ? -16 : 0;
  span.row.rbx_rule = BPFPROF_RBP_UNKNOWN;
  span.row.rbx_offset = static_cast<int16_t>(cgo.slot);
  span.row.go_m_curg_words = static_cast<uint8_t>(cgo.curg_offset / 8);
  std::vector<Span> cut;
  for (const Span& s : spans) {
    if (s.end <= span.start || s.start >= span.end) {
      cut.push_back(s);
      continue;
    }
    if (s.start < span.start) cut.push_back({s.start, span.start, s.row, s.gap});
    if (s.end > span.end) cut.push_back({span.end, s.end, s.row, s.gap});
  }
  cut.push_back(span);
  std::sort(cut.begin(), cut.end(), [](const Span& a, const Span& b) { return a.start < b.start; });
  spans = std::move(cut);
}

// The Go function's spans, with its cgo switches where it is asmcgocall or cgocallback.
void add_go_function(Elf* elf, const go::GoTable& table, size_t index, std::vector<Span>& spans) {
  const std::optional<go::FrameLayout> layout = table.frame_layout(index);
  if (!layout) return;
  std::vector<Span> function;
  add_go_function_spans(*layout, function);
  const std::optional<go::GoFunction> f = table.function(index);
  if (f && f->end > f->entry &&
      (f->name.find("cgo") != std::string_view::npos ||
       f->name.starts_with("runtime.systemstack"))) {
    const std::vector<uint8_t> code = read_code_bytes(elf, f->entry, f->end - f->entry);
    for (const go::CgoSwitch& cgo : go::find_cgo_switches(f->name, f->entry, code, *layout))
      add_cgo_switch_span(cgo, function);
  }
  spans.insert(spans.end(), function.begin(), function.end());
}

// A Go binary's functions take their rules from Go's own tables (symbols/go/pclntab.h),
// stripped or not, in place of any CFI over them (.debug_frame says the same offsets, but not
// where a goroutine's stack ends); code from C objects keeps its CFI.
void add_go_spans(Elf* elf, std::vector<Span>& spans, Budget& budget) {
  if (!is_go_binary(elf)) return;
  size_t size = 0;
  const char* file = elf_rawfile(elf, &size);
  if (file == nullptr) return;
  std::unique_ptr<go::GoTable> table =
      go::GoTable::from_elf({reinterpret_cast<const uint8_t*>(file), size}, nullptr);
  if (!table) return;
  std::vector<Span> go_spans;
  for (size_t i = 0; i < table->function_count(); ++i) {
    if (budget.spent(spans.size() + go_spans.size())) return;
    add_go_function(elf, *table, i, go_spans);
  }
  if (go_spans.empty()) return;
  // Spans over the Go functions' code (sorted by start, not overlapping) are dropped.
  std::erase_if(spans, [&](const Span& s) {
    auto after = std::upper_bound(go_spans.begin(), go_spans.end(), s.start,
                                  [](uint64_t value, const Span& g) { return value < g.start; });
    const bool from_before = after != go_spans.begin() && std::prev(after)->end > s.start;
    return from_before || (after != go_spans.end() && after->start < s.end);
  });
  spans.insert(spans.end(), go_spans.begin(), go_spans.end());
}

// Sorted, not overlapping (where FDEs overlap, the one starting first wins), below 4 GiB.
// Spans come mostly in order (FDEs by address, then a few added rules): the sorted prefix is
// kept and only the rest sorted and merged in (a whole sort was a fifth of libLLVM's build).
void normalize(std::vector<Span>& spans) {
  const auto by_start = [](const Span& a, const Span& b) { return a.start < b.start; };
  const auto tail = std::is_sorted_until(spans.begin(), spans.end(), by_start);
  std::stable_sort(tail, spans.end(), by_start);
  std::inplace_merge(spans.begin(), tail, spans.end(), by_start);
  std::vector<Span> clean;
  clean.reserve(spans.size());
  uint64_t covered_to = 0;
  for (Span span : spans) {
    span.start = std::max(span.start, covered_to);
    span.end = std::min(span.end, kRowPcLimit);
    if (span.start >= span.end) continue;
    clean.push_back(span);
    covered_to = span.end;
  }
  spans = std::move(clean);
}

bool same_rule(const UnwindRow& a, const UnwindRow& b) {
  return a.cfa_rule == b.cfa_rule && a.rbp_rule == b.rbp_rule && a.cfa_offset == b.cfa_offset &&
         a.rbp_offset == b.rbp_offset && a.rbx_rule == b.rbx_rule && a.rbx_offset == b.rbx_offset;
}

std::vector<UnwindRow> rows_of(const std::vector<Span>& spans) {
  std::vector<UnwindRow> rows;
  auto add = [&rows](uint64_t pc, const UnwindRow& rule) {
    if (!rows.empty() && same_rule(rows.back(), rule)) return;
    UnwindRow row = rule;
    row.pc = static_cast<uint32_t>(pc);
    rows.push_back(row);
  };
  const UnwindRow unknown = unknown_span(0, 0, UnwindGap::kNoCfi).row;
  for (size_t i = 0; i < spans.size(); ++i) {
    add(spans[i].start, spans[i].row);
    const bool next_follows = i + 1 < spans.size() && spans[i + 1].start == spans[i].end;
    if (!next_follows && spans[i].end < kRowPcLimit) add(spans[i].end, unknown);
  }
  return rows;
}

// An executable section with its bytes (owned by libelf).
struct CodeSection {
  SectionCoverage coverage;
  const uint8_t* bytes = nullptr;  // section.end - section.start of them, or nullptr
};

// The executable sections that hold bytes of the file; nullopt if one lies above 4 GiB.
std::optional<std::vector<CodeSection>> executable_sections(Elf* elf) {
  std::vector<CodeSection> sections;
  size_t names = 0;
  if (elf_getshdrstrndx(elf, &names) != 0) return sections;
  for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn != nullptr; scn = elf_nextscn(elf, scn)) {
    GElf_Shdr header;
    if (gelf_getshdr(scn, &header) == nullptr || header.sh_type == SHT_NOBITS) continue;
    if ((header.sh_flags & (SHF_ALLOC | SHF_EXECINSTR)) != (SHF_ALLOC | SHF_EXECINSTR)) continue;
    if (header.sh_size == 0) continue;
    const uint64_t end = header.sh_addr + header.sh_size;
    if (end > kRowPcLimit || end < header.sh_addr) return std::nullopt;
    const char* name = elf_strptr(elf, names, header.sh_name);
    const Elf_Data* data = elf_getdata(scn, nullptr);
    const bool whole = data != nullptr && data->d_buf != nullptr && data->d_size == header.sh_size;
    sections.push_back({{name != nullptr ? name : "?", header.sh_addr, end},
                        whole ? static_cast<const uint8_t*>(data->d_buf) : nullptr});
  }
  return sections;
}

// The length of the alignment fill instruction at `at` (the nop forms assemblers pad with:
// 0x90, `0f 1f /0` with any addressing, 0x66/0x2e prefixes; int3), or 0.
size_t fill_length(const uint8_t* at, size_t size) {
  size_t prefixes = 0;
  while (prefixes < size && prefixes < 14 && (at[prefixes] == 0x66 || at[prefixes] == 0x2e))
    ++prefixes;
  const uint8_t* op = at + prefixes;
  const size_t left = size - prefixes;
  if (left >= 1 && (op[0] == 0x90 || (op[0] == 0xcc && prefixes == 0))) return prefixes + 1;
  if (left < 3 || op[0] != 0x0f || op[1] != 0x1f || (op[2] & 0x38) != 0) return 0;
  const uint8_t mod = op[2] >> 6;
  const uint8_t rm = op[2] & 7;
  size_t length = 3 + (mod != 3 && rm == 4 ? 1 : 0);  // SIB byte
  if (mod == 1) length += 1;
  if (mod == 2 || (mod == 0 && rm == 5)) length += 4;
  return length <= left ? prefixes + length : 0;
}

// Whether [from, to) of the section is alignment fill only (padding between functions).
bool is_fill(const CodeSection& section, uint64_t from, uint64_t to) {
  if (section.bytes == nullptr) return false;
  const uint8_t* at = section.bytes + (from - section.coverage.start);
  size_t left = to - from;
  while (left > 0) {
    const size_t length = fill_length(at, left);
    if (length == 0) return false;
    at += length;
    left -= length;
  }
  return true;
}

// Rules read from the instructions (stack_height.h) of each stretch of code that no span
// covers: crtstuff's functions. Stretches beyond kLongestInferred (a file without CFI) are
// left alone: that is not the code this is for, and it would slow the table's build.
void add_inferred_spans(const std::vector<CodeSection>& sections, std::vector<Span>& spans,
                        Budget& budget) {
  constexpr uint64_t kLongestInferred = 64 * 1024;
  const IsFunctionEntry is_function_entry = [&spans](uint64_t address) {
    auto it = std::upper_bound(spans.begin(), spans.end(), address,
                               [](uint64_t value, const Span& s) { return value < s.start; });
    if (it == spans.begin() || (--it)->end <= address) return false;
    return it->row.cfa_rule == BPFPROF_CFA_PLT ||
           (it->row.cfa_rule == BPFPROF_CFA_RSP && it->row.cfa_offset == 8 &&
            it->row.rbp_rule == BPFPROF_RBP_SAME);
  };
  std::vector<Span> inferred;
  auto infer = [&](const CodeSection& section, uint64_t from, uint64_t to) {
    if (from >= to || to - from > kLongestInferred || budget.spent(spans.size() + inferred.size()))
      return;
    if (is_fill(section, from, to)) return;
    const uint8_t* code = section.bytes + (from - section.coverage.start);
    for (const InferredSpan& s : infer_stack_heights(from, code, to - from, is_function_entry)) {
      Span span{s.start, s.end, {}, UnwindGap::kNoCfi};
      span.row.cfa_rule = BPFPROF_CFA_RSP;
      span.row.cfa_offset = static_cast<int32_t>(s.cfa_offset);
      span.row.rbp_rule = s.rbp == InferredRbp::kSame    ? BPFPROF_RBP_SAME
                          : s.rbp == InferredRbp::kSaved ? BPFPROF_RBP_AT_CFA
                                                         : BPFPROF_RBP_UNKNOWN;
      span.row.rbp_offset = s.rbp_offset;
      span.row.rbx_rule = BPFPROF_RBP_UNKNOWN;  // not followed by the reading
      inferred.push_back(span);
    }
  };
  for (const CodeSection& section : sections) {
    if (section.bytes == nullptr) continue;
    const uint64_t start = section.coverage.start;
    const uint64_t end = section.coverage.end;
    if (budget.spent(spans.size() + inferred.size())) return;
    uint64_t done = start;
    // Spans are sorted and do not overlap (normalize): the first one ending after the start.
    auto it = std::upper_bound(spans.begin(), spans.end(), start,
                               [](uint64_t value, const Span& s) { return value < s.end; });
    for (; it != spans.end() && it->start < end; ++it) {
      infer(section, done, std::max(done, it->start));
      done = std::max(done, std::min(it->end, end));
    }
    infer(section, done, end);
  }
  if (inferred.empty() || budget.spent(spans.size() + inferred.size())) return;
  spans.insert(spans.end(), inferred.begin(), inferred.end());
  normalize(spans);
}

void count_gap(CodeSection& section, uint64_t from, uint64_t to) {
  if (from >= to) return;
  if (is_fill(section, from, to))
    section.coverage.padding_bytes += to - from;
  else
    section.coverage.uncovered_bytes[static_cast<size_t>(UnwindGap::kNoCfi)] += to - from;
}

void measure(CodeSection& code, const std::vector<Span>& spans, Budget& budget) {
  SectionCoverage& section = code.coverage;
  auto it = std::upper_bound(spans.begin(), spans.end(), section.start,
                             [](uint64_t value, const Span& s) { return value < s.start; });
  if (it != spans.begin()) --it;
  uint64_t done = section.start;  // counted up to here
  for (; it != spans.end() && it->start < section.end; ++it) {
    if (budget.spent()) return;
    const uint64_t from = std::max(it->start, section.start);
    const uint64_t to = std::min(it->end, section.end);
    if (from >= to) continue;
    count_gap(code, done, from);
    done = to;
    if (!is_usable(it->row)) {
      section.uncovered_bytes[static_cast<size_t>(it->gap)] += to - from;
      continue;
    }
    section.covered_bytes += to - from;
    const bool walks_on =
        it->row.cfa_rule != BPFPROF_CFA_ROOT && it->row.cfa_rule != BPFPROF_CFA_SIGNAL;
    if (walks_on && it->row.rbp_rule == BPFPROF_RBP_UNKNOWN) section.rbp_unknown_bytes += to - from;
  }
  count_gap(code, done, section.end);
}

bool is_x86_64(Elf* elf) {
  GElf_Ehdr header;
  return gelf_getehdr(elf, &header) != nullptr && header.e_machine == EM_X86_64 &&
         header.e_ident[EI_CLASS] == ELFCLASS64;
}

// A .text mostly without CFI (under a tenth covered) was built without unwind tables, its few
// FDEs from assembly or static libraries: Chromium (Debian's: 420 KB of .eh_frame for 236 MB
// of .text, 668,523 `push %rbp; mov %rsp,%rbp` in it, stripped). Its code without CFI is
// walked by frame pointers, as the code of a file with no CFI at all is, and as the stack
// copies' unwinder (libdwfl) walks it.
void add_mostly_uncovered_text_spans(const std::vector<CodeSection>& sections,
                                     std::vector<Span>& spans) {
  for (const CodeSection& section : sections) {
    const SectionCoverage& text = section.coverage;
    if (text.name != ".text" || text.end <= text.start) continue;
    uint64_t covered = 0;
    for (const Span& span : spans)
      if (span.start < text.end && span.end > text.start)
        covered += std::min(span.end, text.end) - std::max(span.start, text.start);
    if (covered * 10 < text.end - text.start)
      add_frame_pointer_spans({text.start, text.end}, spans);
  }
}

}  // namespace

const char* unwind_gap_name(UnwindGap gap) {
  switch (gap) {
    case UnwindGap::kNoCfi:
      return "no CFI";
    case UnwindGap::kCfaExpression:
      return "CFA expression";
    case UnwindGap::kCfaRegister:
      return "CFA from another register";
    case UnwindGap::kReturnAddress:
      return "return address not at CFA-8";
    case UnwindGap::kOffsetRange:
      return "CFA offset out of range";
    case UnwindGap::kUnreadableCfi:
      return "unreadable CFI";
  }
  return "?";
}

const char* unwind_table_error_name(UnwindTableError error) {
  switch (error) {
    case UnwindTableError::kUnreadable:
      return "not a readable ELF file";
    case UnwindTableError::kNotX86_64:
      return "not an x86-64 ELF file";
    case UnwindTableError::kAddressAbove4GiB:
      return "code above 4 GiB";
    case UnwindTableError::kTooManyRows:
      return "more CFI rows than a table takes";
    case UnwindTableError::kTooSlow:
      return "longer to build than a table may take";
  }
  return "?";
}

UnwindTableResult build_unwind_table(const std::string& path, const UnwindTableOptions& options,
                                     int fd) {
  const std::unique_ptr<DwarfModule> module = DwarfModule::open(path, options.symbol_dirs, fd);
  Elf* elf = module != nullptr ? module->elf() : nullptr;
  if (elf == nullptr) return UnwindTableError::kUnreadable;
  if (!is_x86_64(elf)) return UnwindTableError::kNotX86_64;
  std::optional<std::vector<CodeSection>> sections = executable_sections(elf);
  if (!sections) return UnwindTableError::kAddressAbove4GiB;
  Budget budget(options);
  std::vector<Span> spans = collect_spans(*module, budget);
  add_go_spans(elf, spans, budget);
  if (budget.spent(spans.size())) return *budget.error();
  add_v8_builtin_spans(elf, spans);
  add_crt_stub_spans(elf, spans);
  add_entry_stub_span(elf, spans);
  add_mostly_uncovered_text_spans(*sections, spans);  // after the stubs' rules
  normalize(spans);
  add_inferred_spans(*sections, spans, budget);
  if (budget.spent(spans.size())) return *budget.error();
  UnwindTable table{rows_of(spans), {}};
  if (budget.spent(table.rows.size())) return *budget.error();
  for (CodeSection& section : *sections) {
    measure(section, spans, budget);
    table.coverage.push_back(std::move(section.coverage));
  }
  if (budget.spent()) return *budget.error();
  return table;
}

const UnwindRow* find_unwind_row(const std::vector<UnwindRow>& rows, uint64_t pc) {
  return last_starting_at_or_below(rows, pc, &UnwindRow::pc);
}

bool is_usable(const UnwindRow& row) { return row.cfa_rule != BPFPROF_CFA_UNKNOWN; }

}  // namespace bpfprof
