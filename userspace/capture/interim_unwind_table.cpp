// INTERIM: a minimal .eh_frame -> compact-row converter so that the in-kernel walker can be
// exercised end to end before the real table builder (branch unwind-tables:
// symbols/dwarf/unwind_table, with its on-disk cache and coverage tests) is merged. It is
// replaced by that builder's rows_for_file; it has no cache (every table counts as built).
#include "userspace/capture/interim_unwind_table.h"

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <fcntl.h>
#include <libelf.h>

#include <memory>

#include "symbols/dwarf/cfi_functions.h"
#include "symbols/util/unique_handle.h"

namespace bpfprof {

namespace {

constexpr int kRbp = 6, kRsp = 7, kRip = 16;

// The CFA rule, from libdw's expression for it.
void convert_cfa(Dwarf_Frame* frame, bpfprof_unwind_row& row) {
  Dwarf_Op* ops = nullptr;
  size_t n = 0;
  if (dwarf_frame_cfa(frame, &ops, &n) != 0 || n == 0) return;
  auto register_offset = [&](const Dwarf_Op& op, int* reg, int64_t* offset) {
    if (op.atom >= DW_OP_breg0 && op.atom <= DW_OP_breg31) {
      *reg = op.atom - DW_OP_breg0;
      *offset = static_cast<int64_t>(op.number);
      return true;
    }
    if (op.atom != DW_OP_bregx) return false;
    *reg = static_cast<int>(op.number);
    *offset = static_cast<int64_t>(op.number2);
    return true;
  };
  int reg = -1;
  int64_t offset = 0;
  if (!register_offset(ops[0], &reg, &offset) || offset < INT32_MIN || offset > INT32_MAX) return;
  row.cfa_offset = static_cast<int32_t>(offset);
  if (n == 1 && (reg == kRsp || reg == kRbp)) {
    row.cfa_rule = reg == kRsp ? BPFPROF_CFA_RSP : BPFPROF_CFA_RBP;
    return;
  }
  // The PLT's: rsp + off + ((rip & 15) >= 11) << 3.
  const uint8_t plt[] = {DW_OP_breg0 + kRip, DW_OP_lit15, DW_OP_and, DW_OP_lit11,
                         DW_OP_ge,           DW_OP_lit3,  DW_OP_shl, DW_OP_plus};
  if (reg != kRsp || n != 9) return;
  for (size_t i = 0; i < 8; ++i)
    if (ops[i + 1].atom != plt[i]) return;
  row.cfa_rule = BPFPROF_CFA_PLT;
}

// Where register `regno` of the caller is: 0 same value, 1 at CFA + *offset, -1 other.
int saved_at(Dwarf_Frame* frame, int regno, int64_t* offset) {
  Dwarf_Op mem[3];
  Dwarf_Op* ops = nullptr;
  size_t n = 0;
  if (dwarf_frame_register(frame, regno, mem, &ops, &n) != 0) return -1;
  if (n == 0) return ops == nullptr ? 0 : -1;
  if (ops[0].atom != DW_OP_call_frame_cfa) return -1;
  *offset = 0;
  if (n == 1) return 1;
  if (n == 2 && ops[1].atom == DW_OP_plus_uconst) {
    *offset = static_cast<int64_t>(ops[1].number);
    return 1;
  }
  return -1;
}

bpfprof_unwind_row convert(Dwarf_Frame* frame, uint64_t pc) {
  bpfprof_unwind_row row{};
  row.pc = static_cast<uint32_t>(pc);
  Dwarf_Addr start = 0, end = 0;
  bool signal = false;
  const int ra = dwarf_frame_info(frame, &start, &end, &signal);
  Dwarf_Op mem[3];
  Dwarf_Op* ops = nullptr;
  size_t n = 0;
  if (ra >= 0 && dwarf_frame_register(frame, ra, mem, &ops, &n) == 0 && n == 0 && ops == mem) {
    row.cfa_rule = BPFPROF_CFA_ROOT;
    return row;
  }
  if (signal) {
    row.cfa_rule = BPFPROF_CFA_SIGNAL;
    return row;
  }
  int64_t ra_offset = 0;
  if (saved_at(frame, kRip, &ra_offset) != 1 || ra_offset != -8) return row;  // UNKNOWN
  convert_cfa(frame, row);
  int64_t rbp_offset = 0;
  const int rbp = saved_at(frame, kRbp, &rbp_offset);
  row.rbp_rule = rbp == 0 ? BPFPROF_RBP_SAME : rbp == 1 ? BPFPROF_RBP_AT_CFA : BPFPROF_RBP_UNKNOWN;
  if (rbp == 1) row.rbp_offset = static_cast<int16_t>(rbp_offset);
  return row;
}

bool same_rules(const bpfprof_unwind_row& a, const bpfprof_unwind_row& b) {
  return a.cfa_rule == b.cfa_rule && a.cfa_offset == b.cfa_offset && a.rbp_rule == b.rbp_rule &&
         a.rbp_offset == b.rbp_offset;
}

}  // namespace

std::optional<UnwindTable> interim_unwind_table(const std::string& path) {
  elf_version(EV_CURRENT);
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return std::nullopt;
  std::unique_ptr<Elf, int (*)(Elf*)> elf(elf_begin(fd.get(), ELF_C_READ_MMAP, nullptr), elf_end);
  if (!elf || elf_kind(elf.get()) != ELF_K_ELF) return std::nullopt;
  UnwindTable table;
  Dwarf_CFI* cfi = dwarf_getcfi_elf(elf.get());
  if (!cfi) return table;  // no .eh_frame: no rows
  auto add = [&](const bpfprof_unwind_row& row) {
    if (!table.rows.empty() && same_rules(table.rows.back(), row)) return;
    if (!table.rows.empty() && table.rows.back().pc == row.pc) table.rows.pop_back();
    table.rows.push_back(row);
  };
  for (const CodeRange& fde : read_cfi_functions(elf.get())) {
    if (fde.end > UINT32_MAX) break;
    for (uint64_t pc = fde.start; pc < fde.end;) {
      Dwarf_Frame* frame = nullptr;
      if (dwarf_cfi_addrframe(cfi, pc, &frame) != 0) break;
      Dwarf_Addr start = 0, end = 0;
      bool signal = false;
      dwarf_frame_info(frame, &start, &end, &signal);
      add(convert(frame, pc));
      free(frame);
      pc = end > pc ? end : fde.end;
    }
    bpfprof_unwind_row gap{};  // until the next FDE: no rule
    gap.pc = static_cast<uint32_t>(fde.end);
    add(gap);
  }
  dwarf_cfi_end(cfi);
  return table;
}

}  // namespace bpfprof
