#include "symbols/dwarf/no_cfi_spans.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "symbols/dwarf/crt_stubs.h"
#include "symbols/dwarf/v8_builtins.h"

namespace bpfprof {
namespace {

// The frame-pointer rule over the parts of `range` that no span covers: CFA = rbp + 16, the
// return address at CFA - 8, the caller's rbp at CFA - 16. At a function's first or last
// instructions rbp is still its caller's frame: the walk then goes on from the caller's
// caller, one frame short but on the same chain (as libdwfl's frame-pointer fallback does).
// rbx is not followed.
void add_frame_pointer_spans(CodeRange range, std::vector<UnwindSpan>& spans) {
  std::vector<CodeRange> covered;
  for (const UnwindSpan& span : spans)
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
    UnwindSpan span{part.start, part.end, {}, UnwindGap::kNoCfi};
    span.row.cfa_rule = BPFPROF_CFA_RBP;
    span.row.cfa_offset = 16;
    span.row.rbp_rule = BPFPROF_RBP_AT_CFA;
    span.row.rbp_offset = -16;
    span.row.rbx_rule = BPFPROF_RBP_UNKNOWN;
    spans.push_back(span);
  }
}

}  // namespace

void add_crt_stub_spans(Elf* elf, std::vector<UnwindSpan>& spans) {
  for (const CrtStub& stub : find_crt_stubs(elf)) {
    for (auto [start, end] : {std::pair{stub.start, stub.body}, std::pair{stub.body, stub.ret},
                              std::pair{stub.ret, stub.end}}) {
      if (start >= end) continue;
      UnwindSpan span{start, end, {}, UnwindGap::kNoCfi};
      span.row.cfa_rule = BPFPROF_CFA_RSP;
      span.row.cfa_offset = static_cast<int32_t>(stub.cfa_offset_at(start));
      span.row.rbp_rule = BPFPROF_RBP_SAME;
      span.row.rbx_rule = BPFPROF_RBP_SAME;  // .init and .fini move rsp only
      spans.push_back(span);
    }
  }
}

void add_entry_stub_span(Elf* elf, std::vector<UnwindSpan>& spans) {
  const std::optional<EntryStub> stub = entry_stub(elf);
  if (!stub) return;
  uint64_t end = stub->end;
  for (const UnwindSpan& span : spans) {
    if (span.start <= stub->start && stub->start < span.end) return;
    if (span.start > stub->start) end = std::min(end, span.start);
  }
  UnwindSpan span{stub->start, end, {}, UnwindGap::kNoCfi};
  span.row.cfa_rule = BPFPROF_CFA_ROOT;
  span.row.rbp_rule = BPFPROF_RBP_UNKNOWN;
  span.row.rbx_rule = BPFPROF_RBP_UNKNOWN;
  spans.push_back(span);
}

void add_v8_builtin_spans(Elf* elf, std::vector<UnwindSpan>& spans) {
  if (const std::optional<V8EmbeddedCode> blob = find_v8_embedded_code(elf))
    add_frame_pointer_spans({blob->start, blob->end}, spans);
}

// One such file is Debian's Chromium, whose functions keep frame pointers. Its code without CFI
// is walked by frame pointers, as the code of a file with no CFI at all is, and as the stack
// copies' unwinder (libdwfl) walks it.
void add_mostly_uncovered_text_spans(const std::vector<CodeSection>& sections,
                                     std::vector<UnwindSpan>& spans) {
  for (const CodeSection& section : sections) {
    const SectionCoverage& text = section.coverage;
    if (text.name != ".text" || text.end <= text.start) continue;
    uint64_t covered = 0;
    for (const UnwindSpan& span : spans)
      if (span.start < text.end && span.end > text.start)
        covered += std::min(span.end, text.end) - std::max(span.start, text.start);
    if (covered * 10 < text.end - text.start)
      add_frame_pointer_spans({text.start, text.end}, spans);
  }
}

}  // namespace bpfprof
