// libFuzzer target for the unwind table builder (symbols/dwarf/unwind_table.h): any file that a
// user can build and map (crafted .eh_frame, .eh_frame_hdr, .debug_frame, section headers) is
// turned into a table or refused, within the builder's bounds, without crashing or leaking. A
// table that comes out is one the BPF walk and the cache accept: rows sorted by pc, no two
// consecutive alike, known rules, read back by the cache's checks; each executable section's
// bytes counted once (covered, padding or uncovered).
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <numeric>
#include <string>

#include "symbols/dwarf/unwind_table.h"
#include "symbols/dwarf/unwind_table_cache.h"

using namespace bpfprof;

namespace {

// The input as a file that libelf/libdwfl can open by path or descriptor.
class MemoryFile {
 public:
  MemoryFile(const uint8_t* data, size_t size) : fd_(memfd_create("fuzz-unwind", MFD_CLOEXEC)) {
    if (fd_ >= 0 && size) {
      ssize_t ignored = write(fd_, data, size);
      (void)ignored;
    }
  }
  ~MemoryFile() {
    if (fd_ >= 0) close(fd_);
  }
  int fd() const { return fd_; }
  std::string path() const { return "/proc/self/fd/" + std::to_string(fd_); }

 private:
  int fd_;
};

bool same_rule(const UnwindRow& a, const UnwindRow& b) {
  return a.cfa_rule == b.cfa_rule && a.rbp_rule == b.rbp_rule && a.cfa_offset == b.cfa_offset &&
         a.rbp_offset == b.rbp_offset && a.rbx_rule == b.rbx_rule && a.rbx_offset == b.rbx_offset;
}

void check(const UnwindTable& table) {
  const std::vector<UnwindRow>& rows = table.rows;
  for (size_t i = 0; i < rows.size(); ++i) {
    const UnwindRow& row = rows[i];
    if (row.cfa_rule > BPFPROF_CFA_LAST_RULE || row.rbp_rule > BPFPROF_RBP_UNKNOWN ||
        row.rbx_rule > BPFPROF_RBP_UNKNOWN)
      abort();
    if (i > 0 && (row.pc <= rows[i - 1].pc || same_rule(row, rows[i - 1]))) abort();
    if (find_unwind_row(rows, row.pc) != &row) abort();
  }
  if (!rows.empty() && !parse_unwind_rows(serialize_unwind_rows(rows))) abort();
  for (const SectionCoverage& section : table.coverage) {
    if (section.end < section.start) abort();
    const uint64_t uncovered = std::accumulate(section.uncovered_bytes.begin(),
                                               section.uncovered_bytes.end(), uint64_t{0});
    if (section.covered_bytes + section.padding_bytes + uncovered != section.end - section.start)
      abort();
    if (section.rbp_unknown_bytes > section.covered_bytes) abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  MemoryFile file(data, size);
  // As the recorder builds a table: from the descriptor it holds, the path naming the file.
  const UnwindTableResult result = build_unwind_table(file.path(), {}, file.fd());
  if (const auto* table = std::get_if<UnwindTable>(&result)) check(*table);
  return 0;
}
