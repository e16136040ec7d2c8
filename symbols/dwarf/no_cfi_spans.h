// Rules for code that no FDE covers, known from what the code is rather than from CFI: glibc's
// .init and .fini stubs and the entry point's (crt_stubs.h), V8's embedded builtins
// (v8_builtins.h), and frame pointers over a .text mostly without CFI. Each adds its spans
// (unwind_spans.h) only where no span covers the code yet, or (the .init and .fini stubs)
// after the CFI's, so that normalize_spans lets an FDE at the same address win.
#pragma once

#include <gelf.h>

#include <vector>

#include "symbols/dwarf/code_gaps.h"
#include "symbols/dwarf/unwind_spans.h"

namespace bpfprof {

// The rules of the .init and .fini stubs that no FDE covers, after the CFI's spans: where
// .debug_frame has one starting at the same address, it wins.
void add_crt_stub_spans(Elf* elf, std::vector<UnwindSpan>& spans);

// A ROOT span over the entry point's stub when no span covers it, up to the next span: the
// walk ends there as the userspace unwinder does (DwarfModule::is_thread_root).
void add_entry_stub_span(Elf* elf, std::vector<UnwindSpan>& spans);

// V8's embedded builtins where no span covers them: by frame pointers (no builtin's CFA is in
// rbx).
void add_v8_builtin_spans(Elf* elf, std::vector<UnwindSpan>& spans);

// Frame pointers over the code without spans of a .text mostly without them (under a tenth
// covered): one built without unwind tables, its few FDEs from assembly or static libraries.
void add_mostly_uncovered_text_spans(const std::vector<CodeSection>& sections,
                                     std::vector<UnwindSpan>& spans);

}  // namespace bpfprof
