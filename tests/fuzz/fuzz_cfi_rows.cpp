// libFuzzer target for the CFI program reader (symbols/dwarf/cfi_rows.h): any CIE and FDE
// instructions (a user can write them in a file bpfprof builds a table of) give rows in order,
// inside the FDE's range, each after the last, or an address inside the range from which they
// cannot be read; within bounds (remembered states), without crashing. The input: a byte of
// data alignment, a byte of code alignment, a byte for the CIE's share of the rest, then the
// CIE's and the FDE's instructions.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "symbols/dwarf/cfi_rows.h"

using namespace bpfprof;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 3) return 0;
  CfiFde fde;
  fde.data_alignment = static_cast<int8_t>(data[0]);
  fde.code_alignment = data[1];
  const size_t rest = size - 3;
  const size_t cie_size = rest * data[2] / 255;
  fde.cie_program = {data + 3, cie_size};
  fde.program = {data + 3 + cie_size, rest - cie_size};
  fde.range = {0x1000, 0x1000 + 64 * 1024};
  uint64_t next = fde.range.start;
  size_t rows = 0;
  const std::optional<uint64_t> unreadable = read_cfi_rows(fde, [&](const CfiRow& row) {
    if (row.start != next || row.end <= row.start || row.end > fde.range.end) abort();
    if (row.cfa.kind == CfiCfa::Kind::kExpression) (void)read_cfi_expression(row.cfa.expression);
    next = row.end;
    return ++rows < 100'000;
  });
  if (unreadable && (*unreadable != next || *unreadable >= fde.range.end)) abort();
  if (!unreadable && rows < 100'000 && next != fde.range.end) abort();
  return 0;
}
