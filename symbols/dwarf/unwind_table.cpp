#include "symbols/dwarf/unwind_table.h"

#include <gelf.h>

#include <memory>
#include <optional>
#include <utility>

#include "symbols/dwarf/cfi_spans.h"
#include "symbols/dwarf/code_gaps.h"
#include "symbols/dwarf/dwarf_module.h"
#include "symbols/dwarf/go_spans.h"
#include "symbols/dwarf/no_cfi_spans.h"
#include "symbols/dwarf/unwind_spans.h"
#include "symbols/util/sorted_ranges.h"

namespace bpfprof {
namespace {

bool is_x86_64(Elf* elf) {
  GElf_Ehdr header;
  return gelf_getehdr(elf, &header) != nullptr && header.e_machine == EM_X86_64 &&
         header.e_ident[EI_CLASS] == ELFCLASS64;
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
    case UnwindTableError::kNotInCache:
      return "not in the table cache";
  }
  return "?";
}

UnwindTableResult build_unwind_table(const std::string& path, const UnwindTableOptions& options,
                                     int fd) {
  const std::unique_ptr<DwarfModule> module =
      DwarfModule::open(path, options.symbol_dirs, fd, DwarfUse::kFrames);
  Elf* elf = module != nullptr ? module->elf() : nullptr;
  if (elf == nullptr) return UnwindTableError::kUnreadable;
  if (!is_x86_64(elf)) return UnwindTableError::kNotX86_64;
  std::optional<std::vector<CodeSection>> sections = executable_sections(elf);
  if (!sections) return UnwindTableError::kAddressAbove4GiB;
  UnwindBudget budget(options);
  std::vector<UnwindSpan> spans = cfi_spans(*module, budget);
  add_go_spans(elf, spans, budget);
  if (budget.spent(spans.size())) return *budget.error();
  add_v8_builtin_spans(elf, spans);
  add_crt_stub_spans(elf, spans);
  add_entry_stub_span(elf, spans);
  add_mostly_uncovered_text_spans(*sections, spans);  // after the stubs' rules
  normalize_spans(spans);
  add_inferred_spans(*sections, spans, budget);
  if (budget.spent(spans.size())) return *budget.error();
  UnwindTable table{rows_of_spans(spans), {}};
  if (budget.spent(table.rows.size())) return *budget.error();
  for (CodeSection& section : *sections) {
    measure_coverage(section, spans, budget);
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
