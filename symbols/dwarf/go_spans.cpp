#include "symbols/dwarf/go_spans.h"

#include <algorithm>
#include <iterator>
#include <memory>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "symbols/elf/elf_file.h"
#include "symbols/go/cgo_switches.h"
#include "symbols/go/pclntab.h"
#include "symbols/go/vdso_calls.h"

namespace bpfprof {
namespace {

// A Go function's spans from Go's own pcsp table: CFA = sp + delta + 8. Go keeps the caller's
// rbp at CFA - 16 once the frame is set up, but the instruction between the sp change and the
// save is not told apart here: UNKNOWN beyond the entry, where no Go frame needs it. Where
// Go's traceback ends (a goroutine's or thread's first function, a switch of stacks) the walk
// stops (ROOT); whether the stack is complete there is GoTable::is_root_at's to say. With
// `through_switch` (a vDSO caller, whose switch go_vdso_spans covers), its pcsp rows are used.
// A signal trampoline's rows lead to the restorer above it (add_signal_return_span), not a stop.
void add_go_function_spans(const go::FrameLayout& layout, bool through_switch,
                           bool signal_trampoline, std::vector<UnwindSpan>& spans) {
  const bool stops = (layout.end == go::TracebackEnd::kTopFrame && !signal_trampoline) ||
                     (layout.end == go::TracebackEnd::kStackSwitch && !through_switch);
  for (const go::SpDelta& sp : layout.sp) {
    UnwindSpan span{sp.start, sp.end, {}, UnwindGap::kNoCfi};
    if (stops || sp.delta < 0) {
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

// `span` in place of what `spans` (sorted, not overlapping) had over its addresses.
void overlay_span(const UnwindSpan& span, std::vector<UnwindSpan>& spans) {
  std::vector<UnwindSpan> cut;
  for (const UnwindSpan& s : spans) {
    if (s.end <= span.start || s.start >= span.end) {
      cut.push_back(s);
      continue;
    }
    if (s.start < span.start) cut.push_back({s.start, span.start, s.row, s.gap});
    if (s.end > span.end) cut.push_back({span.end, s.end, s.row, s.gap});
  }
  cut.push_back(span);
  std::sort(cut.begin(), cut.end(),
            [](const UnwindSpan& a, const UnwindSpan& b) { return a.start < b.start; });
  spans = std::move(cut);
}

// A vDSO caller's code where rbp is its frame's base (symbols/go/vdso_calls.h): CFA = rbp + 16,
// the caller's rbp at CFA - 16, on whichever stack sp is.
void add_vdso_caller_spans(const std::vector<CodeRange>& ranges, std::vector<UnwindSpan>& spans) {
  for (const CodeRange& range : ranges) {
    UnwindSpan span{range.start, range.end, {}, UnwindGap::kNoCfi};
    span.row.cfa_rule = BPFPROF_CFA_GO_FRAME_BASE;
    span.row.cfa_offset = 16;
    span.row.rbp_rule = BPFPROF_RBP_AT_CFA;
    span.row.rbp_offset = -16;
    span.row.rbx_rule = BPFPROF_RBP_UNKNOWN;
    overlay_span(span, spans);
  }
}

static_assert(go::kGStackHi == BPFPROF_GO_G_STACK_HI && go::kGM == BPFPROF_GO_G_M &&
                  go::kMG0 == BPFPROF_GO_M_G0 && go::kGSchedSp == BPFPROF_GO_G_SCHED_SP,
              "the kernel walk reads Go's fields where the code was checked to");

// A cgo switch of stacks (symbols/go/cgo_switches.h) at its call's last byte, where the
// walk looks up a return address, cut out of the function's pcsp spans.
void add_cgo_switch_span(const go::CgoSwitch& cgo, std::vector<UnwindSpan>& spans) {
  UnwindSpan span{cgo.return_address - 1, cgo.return_address, {}, UnwindGap::kNoCfi};
  span.row.cfa_rule = cgo.kind == go::CgoSwitchKind::kCallIntoC        ? BPFPROF_CFA_GO_CGO_CALL
                      : cgo.kind == go::CgoSwitchKind::kCallbackIntoGo ? BPFPROF_CFA_GO_CGO_CALLBACK
                                                                       : BPFPROF_CFA_GO_SYSTEMSTACK;
  span.row.cfa_offset = cgo.cfa_offset;
  span.row.rbp_rule = cgo.rbp_lost    ? BPFPROF_RBP_UNKNOWN
                      : cgo.rbp_saved ? BPFPROF_RBP_AT_CFA
                                      : BPFPROF_RBP_SAME;
  span.row.rbp_offset = cgo.rbp_saved ? -16 : 0;
  span.row.rbx_rule = BPFPROF_RBP_UNKNOWN;
  span.row.rbx_offset = static_cast<int16_t>(cgo.slot);
  span.row.go_m_curg_words = static_cast<uint8_t>(cgo.curg_offset / 8);
  overlay_span(span, spans);
}

// Whether a function's code holds a switch of stacks that find_cgo_switches looks for.
bool may_switch_stacks(std::string_view name) {
  return name.find("cgo") != std::string_view::npos || name.starts_with("runtime.systemstack") ||
         name.starts_with("runtime.morestack");
}

// The restorer's code, and the padding byte before it: the signal trampoline returns to its
// first instruction, whose row the walk finds at the byte before (a return address's), and a
// thread in its rt_sigreturn is at the second. Both have the interrupted context at sp, as at
// glibc's __restore_rt (BPFPROF_CFA_SIGNAL). Only where that byte is padding (int3): over the
// spans made so far, which end with the function before it.
void add_signal_return_span(Elf* elf, const go::GoFunction& f, std::vector<UnwindSpan>& spans) {
  if (f.entry == 0 || read_code_bytes(elf, f.entry - 1, 1) != std::vector<uint8_t>{0xcc}) return;
  UnwindSpan span{f.entry - 1, f.end, {}, UnwindGap::kNoCfi};
  span.row.cfa_rule = BPFPROF_CFA_SIGNAL;
  span.row.rbp_rule = BPFPROF_RBP_UNKNOWN;
  span.row.rbx_rule = BPFPROF_RBP_UNKNOWN;
  overlay_span(span, spans);
}

// The Go function's spans, with its switches of stacks where it is asmcgocall, cgocallback,
// systemstack or morestack, its frame-pointer ranges where it calls the vDSO, and the signal
// frame's row where it is the signal restorer.
void add_go_function(Elf* elf, const go::GoTable& table, size_t index,
                     const std::optional<go::CgoSwitch>& systemstack,
                     std::vector<UnwindSpan>& spans) {
  const std::optional<go::FrameLayout> layout = table.frame_layout(index);
  if (!layout) return;
  const std::optional<go::GoFunction> f = table.function(index);
  const bool has_code = f && f->end > f->entry;
  std::vector<CodeRange> vdso_ranges;
  if (has_code && go::calls_vdso(f->name))
    vdso_ranges =
        go::frame_pointer_ranges(f->entry, read_code_bytes(elf, f->entry, f->end - f->entry));
  std::vector<UnwindSpan> function;
  add_go_function_spans(*layout, !vdso_ranges.empty(), f && go::is_signal_trampoline(f->name),
                        function);
  add_vdso_caller_spans(vdso_ranges, function);
  if (has_code && may_switch_stacks(f->name)) {
    const std::vector<uint8_t> code = read_code_bytes(elf, f->entry, f->end - f->entry);
    for (const go::CgoSwitch& cgo : go::find_cgo_switches(f->name, f->entry, code, *layout,
                                                          systemstack ? &*systemstack : nullptr))
      add_cgo_switch_span(cgo, function);
  }
  spans.insert(spans.end(), function.begin(), function.end());
  if (has_code && go::is_signal_return(f->name)) add_signal_return_span(elf, *f, spans);
}

}  // namespace

void add_go_spans(Elf* elf, std::vector<UnwindSpan>& spans, UnwindBudget& budget) {
  if (!is_go_binary(elf)) return;
  size_t size = 0;
  const char* file = elf_rawfile(elf, &size);
  if (file == nullptr) return;
  std::unique_ptr<go::GoTable> table =
      go::GoTable::from_elf({reinterpret_cast<const uint8_t*>(file), size}, nullptr);
  if (!table) return;
  std::vector<UnwindSpan> go_spans;
  const std::optional<go::CgoSwitch> systemstack = go::systemstack_switch(
      *table, [elf](uint64_t vaddr, uint64_t size) { return read_code_bytes(elf, vaddr, size); });
  for (size_t i = 0; i < table->function_count(); ++i) {
    if (budget.spent(spans.size() + go_spans.size())) return;
    add_go_function(elf, *table, i, systemstack, go_spans);
  }
  if (go_spans.empty()) return;
  // Spans over the Go functions' code (sorted by start, not overlapping) are dropped.
  std::erase_if(spans, [&](const UnwindSpan& s) {
    auto after =
        std::upper_bound(go_spans.begin(), go_spans.end(), s.start,
                         [](uint64_t value, const UnwindSpan& g) { return value < g.start; });
    const bool from_before = after != go_spans.begin() && std::prev(after)->end > s.start;
    return from_before || (after != go_spans.end() && after->start < s.end);
  });
  spans.insert(spans.end(), go_spans.begin(), go_spans.end());
}

}  // namespace bpfprof
