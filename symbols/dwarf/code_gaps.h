// The code of a file that the spans (unwind_spans.h) leave uncovered: the executable sections
// and their bytes, alignment fill told apart from code, rules inferred from the instructions of
// short gaps (stack_height.h), and the count of each section's bytes by how they are covered
// (SectionCoverage).
#pragma once

#include <gelf.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "symbols/dwarf/unwind_spans.h"

namespace bpfprof {

// An executable section with its bytes (owned by libelf).
struct CodeSection {
  SectionCoverage coverage;
  const uint8_t* bytes = nullptr;  // section.end - section.start of them, or nullptr
};

// The executable sections that hold bytes of the file; nullopt if one lies above 4 GiB.
std::optional<std::vector<CodeSection>> executable_sections(Elf* elf);

// Rules read from the instructions (stack_height.h) of each stretch of code that no span of
// `spans` (normalized) covers, added and normalized: crtstuff's functions.
void add_inferred_spans(const std::vector<CodeSection>& sections, std::vector<UnwindSpan>& spans,
                        UnwindBudget& budget);

// Counts the bytes of `code` by how `spans` (normalized) cover them, into its coverage.
void measure_coverage(CodeSection& code, const std::vector<UnwindSpan>& spans,
                      UnwindBudget& budget);

}  // namespace bpfprof
