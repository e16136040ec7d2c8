#include "symbols/dwarf/cfi_rows.h"

#include <cstring>
#include <limits>

#include "symbols/util/leb128.h"

namespace bpfprof {
namespace {

// remember_state without restore_state: GCC nests one or two; a crafted FDE could push forever.
constexpr size_t kMaxRememberedStates = 64;
constexpr size_t kMaxExpressionOps = 16;

struct CfiState {
  CfiCfa cfa;
  CfiRegisterRule rip;
  CfiRegisterRule rbp;
  CfiRegisterRule rbx{CfiRegisterRule::Kind::kUndefined, 0};
};

// The rule of `reg` if it is one the tables use (const or not, as `state` is).
template <typename StateT>
auto tracked(StateT& state, uint64_t reg) -> decltype(&state.rip) {
  switch (reg) {
    case kDwarfRip:
      return &state.rip;
    case kDwarfRbp:
      return &state.rbp;
    case kDwarfRbx:
      return &state.rbx;
    default:
      return nullptr;
  }
}

// `factor` times `value`, nullopt when it does not fit.
std::optional<int64_t> factored(int64_t value, int64_t factor) {
  int64_t product = 0;
  if (__builtin_mul_overflow(value, factor, &product)) return std::nullopt;
  return product;
}

std::optional<int64_t> as_signed(uint64_t value) {
  if (value > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
  return static_cast<int64_t>(value);
}

CfiRegisterRule saved_at(std::optional<int64_t> offset) {
  if (!offset) return {CfiRegisterRule::Kind::kOther, 0};
  return {CfiRegisterRule::Kind::kAtCfa, *offset};
}

// DW_CFA_expression: libdw evaluates it with the CFA pushed first, so an empty one or a lone
// DW_OP_plus_uconst is "saved at CFA + constant"; anything else is not followed.
CfiRegisterRule expression_rule(std::span<const uint8_t> bytes) {
  const std::optional<std::vector<Dwarf_Op>> ops = read_cfi_expression(bytes);
  if (ops && ops->empty()) return {CfiRegisterRule::Kind::kAtCfa, 0};
  if (ops && ops->size() == 1 && (*ops)[0].atom == DW_OP_plus_uconst)
    return {CfiRegisterRule::Kind::kAtCfa, static_cast<int64_t>((*ops)[0].number)};
  return {CfiRegisterRule::Kind::kOther, 0};
}

// Runs CFI instructions over a state; `advance` is called with each new location.
class Program {
 public:
  Program(const CfiFde& fde, CfiState& state, const CfiState* initial)
      : fde_(fde), state_(state), initial_(initial) {}

  // False at an instruction that cannot be read; `advance(delta)` returns false to stop.
  template <typename Advance>
  bool run(std::span<const uint8_t> bytes, Advance&& advance) {
    at_ = bytes.data();
    end_ = bytes.data() + bytes.size();
    while (at_ < end_) {
      const uint8_t opcode = *at_++;
      const uint8_t high = opcode & 0xc0;
      const uint8_t low = opcode & 0x3f;
      if (high == DW_CFA_advance_loc) {
        if (!advance(low)) return true;
      } else if (high == DW_CFA_offset) {
        if (!offset(low)) return false;
      } else if (high == DW_CFA_restore) {
        restore(low);
      } else if (opcode >= DW_CFA_advance_loc1 && opcode <= DW_CFA_advance_loc4) {
        const size_t size = opcode == DW_CFA_advance_loc1   ? 1
                            : opcode == DW_CFA_advance_loc2 ? 2
                                                            : 4;
        if (static_cast<size_t>(end_ - at_) < size) return false;
        uint32_t delta = 0;
        std::memcpy(&delta, at_, size);  // little-endian files
        at_ += size;
        if (!advance(delta)) return true;
      } else if (!extended(opcode)) {
        return false;
      }
    }
    return true;
  }

 private:
  std::optional<uint64_t> uleb() { return read_uleb128(at_, end_); }
  std::optional<int64_t> sleb() { return read_sleb128(at_, end_); }

  std::optional<std::span<const uint8_t>> block() {
    const std::optional<uint64_t> size = uleb();
    if (!size || *size > static_cast<uint64_t>(end_ - at_)) return std::nullopt;
    const std::span<const uint8_t> bytes(at_, *size);
    at_ += *size;
    return bytes;
  }

  void set(uint64_t reg, CfiRegisterRule rule) {
    if (CfiRegisterRule* r = tracked(state_, reg)) *r = rule;
  }

  bool offset(uint64_t reg) {
    const std::optional<uint64_t> n = uleb();
    if (!n) return false;
    const std::optional<int64_t> value = as_signed(*n);
    set(reg, saved_at(value ? factored(*value, fde_.data_alignment) : std::nullopt));
    return true;
  }

  // To the rule after the CIE's instructions (the ABI's default inside them).
  void restore(uint64_t reg) {
    CfiState abi;
    const CfiState& from = initial_ != nullptr ? *initial_ : abi;
    if (CfiRegisterRule* r = tracked(state_, reg)) *r = *tracked(from, reg);
  }

  bool def_cfa(uint64_t reg, std::optional<int64_t> offset) {
    state_.cfa = {CfiCfa::Kind::kRegister, reg, offset, {}};
    return true;
  }

  // def_cfa_register and def_cfa_offset change a register rule's half (libdw refuses them
  // over an expression or no rule).
  bool has_register_cfa() const { return state_.cfa.kind == CfiCfa::Kind::kRegister; }

  bool extended(uint8_t opcode);
  bool cfa_instruction(uint8_t opcode);
  bool register_instruction(uint8_t opcode);

  const CfiFde& fde_;
  CfiState& state_;
  const CfiState* initial_;  // nullptr while running the CIE's instructions
  std::vector<CfiState> remembered_;
  const uint8_t* at_ = nullptr;
  const uint8_t* end_ = nullptr;
};

bool Program::extended(uint8_t opcode) {
  switch (opcode) {
    case DW_CFA_nop:
      return true;
    case DW_CFA_GNU_args_size:
      return uleb().has_value();
    case DW_CFA_remember_state:
      if (remembered_.size() >= kMaxRememberedStates) return false;
      remembered_.push_back(state_);
      return true;
    case DW_CFA_restore_state:
      if (remembered_.empty()) return false;
      state_ = remembered_.back();
      remembered_.pop_back();
      return true;
    case DW_CFA_def_cfa:
    case DW_CFA_def_cfa_sf:
    case DW_CFA_def_cfa_register:
    case DW_CFA_def_cfa_offset:
    case DW_CFA_def_cfa_offset_sf:
    case DW_CFA_def_cfa_expression:
      return cfa_instruction(opcode);
    default:
      return register_instruction(opcode);
  }
}

bool Program::cfa_instruction(uint8_t opcode) {
  const int64_t data_alignment = fde_.data_alignment;
  switch (opcode) {
    case DW_CFA_def_cfa: {
      const std::optional<uint64_t> reg = uleb();
      const std::optional<uint64_t> n = reg ? uleb() : std::nullopt;
      return n && def_cfa(*reg, as_signed(*n));
    }
    case DW_CFA_def_cfa_sf: {
      const std::optional<uint64_t> reg = uleb();
      const std::optional<int64_t> n = reg ? sleb() : std::nullopt;
      return n && def_cfa(*reg, factored(*n, data_alignment));
    }
    case DW_CFA_def_cfa_register: {
      const std::optional<uint64_t> reg = uleb();
      if (!reg || !has_register_cfa()) return false;
      state_.cfa.reg = *reg;
      return true;
    }
    case DW_CFA_def_cfa_offset: {
      const std::optional<uint64_t> n = uleb();
      if (!n || !has_register_cfa()) return false;
      state_.cfa.offset = as_signed(*n);
      return true;
    }
    case DW_CFA_def_cfa_offset_sf: {
      const std::optional<int64_t> n = sleb();
      if (!n || !has_register_cfa()) return false;
      state_.cfa.offset = factored(*n, data_alignment);
      return true;
    }
    default: {  // DW_CFA_def_cfa_expression
      const std::optional<std::span<const uint8_t>> bytes = block();
      if (!bytes) return false;
      state_.cfa = {CfiCfa::Kind::kExpression, 0, std::nullopt, *bytes};
      return true;
    }
  }
}

// The instructions that set one register's rule; false for any other (set_loc, which no
// x86-64 toolchain writes, and the vendors' own).
bool Program::register_instruction(uint8_t opcode) {
  const int64_t data_alignment = fde_.data_alignment;
  const std::optional<uint64_t> reg = uleb();
  if (!reg) return false;
  switch (opcode) {
    case DW_CFA_offset_extended:
      return offset(*reg);
    case DW_CFA_offset_extended_sf: {
      const std::optional<int64_t> n = sleb();
      if (n) set(*reg, saved_at(factored(*n, data_alignment)));
      return n.has_value();
    }
    case DW_CFA_GNU_negative_offset_extended: {
      const std::optional<uint64_t> n = uleb();
      const std::optional<int64_t> value = n ? as_signed(*n) : std::nullopt;
      if (n) set(*reg, saved_at(value ? factored(-*value, data_alignment) : std::nullopt));
      return n.has_value();
    }
    case DW_CFA_restore_extended:
      restore(*reg);
      return true;
    case DW_CFA_undefined:
      set(*reg, {CfiRegisterRule::Kind::kUndefined, 0});
      return true;
    case DW_CFA_same_value:
      set(*reg, {CfiRegisterRule::Kind::kSame, 0});
      return true;
    case DW_CFA_register: {
      const std::optional<uint64_t> holder = uleb();
      const std::optional<int64_t> value = holder ? as_signed(*holder) : std::nullopt;
      if (holder)
        set(*reg, value ? CfiRegisterRule{CfiRegisterRule::Kind::kInRegister, *value}
                        : CfiRegisterRule{CfiRegisterRule::Kind::kOther, 0});
      return holder.has_value();
    }
    case DW_CFA_val_offset:
    case DW_CFA_val_offset_sf: {
      const bool read = opcode == DW_CFA_val_offset ? uleb().has_value() : sleb().has_value();
      if (read) set(*reg, {CfiRegisterRule::Kind::kOther, 0});
      return read;
    }
    case DW_CFA_expression:
    case DW_CFA_val_expression: {
      const std::optional<std::span<const uint8_t>> bytes = block();
      if (bytes)
        set(*reg, opcode == DW_CFA_expression ? expression_rule(*bytes)
                                              : CfiRegisterRule{CfiRegisterRule::Kind::kOther, 0});
      return bytes.has_value();
    }
    default:
      return false;
  }
}

}  // namespace

std::optional<uint64_t> read_cfi_rows(const CfiFde& fde,
                                      const std::function<bool(const CfiRow&)>& row) {
  const uint64_t end = fde.range.end;
  if (!fde.program_known) return fde.range.start;
  CfiState state;
  if (!Program(fde, state, nullptr).run(fde.cie_program, [](uint64_t) { return true; }))
    return fde.range.start;
  const CfiState initial = state;
  uint64_t location = fde.range.start;
  bool stopped = false;
  const auto emit = [&](uint64_t to) {
    stopped = !row(CfiRow{location, to, state.cfa, state.rip, state.rbp, state.rbx});
  };
  const auto advance = [&](uint64_t delta) {
    uint64_t step = 0;
    uint64_t next = 0;
    if (__builtin_mul_overflow(delta, fde.code_alignment, &step) ||
        __builtin_add_overflow(location, step, &next) || next >= end) {
      return false;  // the rest of the range is this row's
    }
    if (next > location) emit(next);
    location = next;
    return !stopped;
  };
  const bool read = Program(fde, state, &initial).run(fde.program, advance);
  if (stopped) return std::nullopt;
  if (!read) return location;
  if (location < end) emit(end);
  return std::nullopt;
}

std::optional<std::vector<Dwarf_Op>> read_cfi_expression(std::span<const uint8_t> bytes) {
  std::vector<Dwarf_Op> ops;
  const uint8_t* at = bytes.data();
  const uint8_t* end = at + bytes.size();
  while (at < end) {
    if (ops.size() == kMaxExpressionOps) return std::nullopt;
    Dwarf_Op op{};
    op.atom = *at++;
    if (op.atom >= DW_OP_breg0 && op.atom <= DW_OP_breg31) {
      const std::optional<int64_t> offset = read_sleb128(at, end);
      if (!offset) return std::nullopt;
      op.number = static_cast<Dwarf_Word>(*offset);
    } else if (op.atom == DW_OP_bregx) {
      const std::optional<uint64_t> reg = read_uleb128(at, end);
      const std::optional<int64_t> offset = reg ? read_sleb128(at, end) : std::nullopt;
      if (!offset) return std::nullopt;
      op.number = *reg;
      op.number2 = static_cast<Dwarf_Word>(*offset);
    } else if (op.atom == DW_OP_plus_uconst) {
      const std::optional<uint64_t> value = read_uleb128(at, end);
      if (!value) return std::nullopt;
      op.number = *value;
    } else if (!(op.atom >= DW_OP_lit0 && op.atom <= DW_OP_lit31) && op.atom != DW_OP_and &&
               op.atom != DW_OP_ge && op.atom != DW_OP_shl && op.atom != DW_OP_plus) {
      return std::nullopt;
    }
    ops.push_back(op);
  }
  return ops;
}

}  // namespace bpfprof
