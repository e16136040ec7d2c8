// libFuzzer target for the unwind table cache's file reader (symbols/dwarf/unwind_table_cache.h):
// any bytes found in the cache directory are parsed without crashing, and what is accepted
// is a valid table (sorted rows, known rules; a compact form whose lookups stay in its
// arrays) that serializes back to the same bytes; read from a file, its compact form alone is
// the same.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "symbols/dwarf/unwind_table_cache.h"
#include "symbols/util/unique_handle.h"

using namespace bpfprof;

namespace {

// The compact form alone, as the recorder reads it from the entry's file: accepted whenever
// the whole entry is, and then the same.
void check_compact_read(std::string_view bytes, const std::optional<ParsedUnwindTable>& whole) {
  static const UniqueFd fd(memfd_create("entry", 0));
  if (ftruncate(fd.get(), 0) != 0 ||
      pwrite(fd.get(), bytes.data(), bytes.size(), 0) != static_cast<ssize_t>(bytes.size()))
    abort();
  const std::optional<ParsedUnwindTable> read =
      read_unwind_table(fd.get(), bytes.size(), TableForm::kCompactFirst);
  if (!whole) return;
  if (!read || read->row_count != whole->row_count) abort();
  if (serialize_unwind_table(whole->rows, read->compact) != bytes) abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  const std::optional<ParsedUnwindTable> parsed = parse_unwind_table(bytes);
  check_compact_read(bytes, parsed);
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
