// The rows of one FDE (cfi_functions.h), read in one pass over its CIE's and its own CFI
// instructions: the rules the unwind tables use (the CFA, and how the caller's rip, rbp and rbx
// are found), as libdw's dwarf_cfi_addrframe gives them one address at a time, with x86-64's
// ABI defaults as elfutils has them (rbp, rip "same value"; rbx undefined).
//
// Why not libdw: it runs an FDE's program again from its start for every row asked for and
// allocates a frame for each, a large share of a big table's build. libdw still frames the
// section's entries (dwarf_next_cfi), and the unit tests check these rows against it address by
// address.
#pragma once

#include <dwarf.h>
#include <elfutils/libdw.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <vector>

#include "symbols/dwarf/cfi_functions.h"
#include "symbols/dwarf/x86_64_registers.h"

namespace bpfprof {

// How the caller's value of a register is found.
struct CfiRegisterRule {
  enum class Kind : uint8_t {
    kSame,        // unchanged
    kUndefined,   // not recoverable
    kAtCfa,       // saved at CFA + value
    kInRegister,  // held in register `value`
    kOther,       // a value rule or an expression other than CFA + constant
  };
  Kind kind = Kind::kSame;
  int64_t value = 0;
};

// The CFA: a register plus an offset, or a DWARF expression.
struct CfiCfa {
  enum class Kind : uint8_t { kUndefined, kRegister, kExpression };
  Kind kind = Kind::kUndefined;
  uint64_t reg = 0;
  std::optional<int64_t> offset;        // kRegister; nullopt when it does not fit 64 bits
  std::span<const uint8_t> expression;  // kExpression: its bytes, in the section
};

// One row: [start, end) in the FDE's addresses.
struct CfiRow {
  uint64_t start = 0;
  uint64_t end = 0;
  CfiCfa cfa;
  CfiRegisterRule rip;
  CfiRegisterRule rbp;
  CfiRegisterRule rbx;
};

// Calls `row` for each row of `fde`, in order, within its range, until it returns false.
// Returns the address from which on its rows cannot be read (an instruction unknown or cut
// short, a state popped that was not pushed), or nullopt when every row was (or `row` stopped).
std::optional<uint64_t> read_cfi_rows(const CfiFde& fde,
                                      const std::function<bool(const CfiRow&)>& row);

// The operations of a DWARF expression as libdw gives them (atom, number, number2), for the
// few a CFA or register rule is compared with (DW_OP_bregN, bregx, litN, plus_uconst, and,
// ge, shl, plus); nullopt for any other operation, bytes cut short, or more than 16 of them.
std::optional<std::vector<Dwarf_Op>> read_cfi_expression(std::span<const uint8_t> bytes);

}  // namespace bpfprof
