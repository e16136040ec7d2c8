// libFuzzer target for the unwind table cache's file reader (symbols/dwarf/unwind_table_cache.h):
// any bytes found in the cache directory are parsed without crashing, and what is accepted
// is a valid table (sorted rows, known rules; a compact form whose lookups stay in its
// arrays) that serializes back to the same bytes.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "symbols/dwarf/unwind_table_cache.h"

using namespace bpfprof;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  const std::optional<ParsedUnwindTable> parsed = parse_unwind_table(bytes);
  if (!parsed) return 0;
  const std::vector<UnwindRow>* rows = &parsed->rows;
  if (serialize_unwind_table(*rows, parsed->compact) != bytes) abort();
  if (parsed->compact)
    for (const UnwindRow& row : *rows) {
      const UnwindRule* rule = find_compact_rule(*parsed->compact, row.pc);
      if (rule && (rule < parsed->compact->rules.data() ||
                   rule >= parsed->compact->rules.data() + parsed->compact->rules.size()))
        abort();
    }
  for (size_t i = 0; i < rows->size(); ++i) {
    if (i > 0 && (*rows)[i].pc <= (*rows)[i - 1].pc) abort();
    if (find_unwind_row(*rows, (*rows)[i].pc) != &(*rows)[i]) abort();
  }
  return 0;
}
