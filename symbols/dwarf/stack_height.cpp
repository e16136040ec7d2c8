#include "symbols/dwarf/stack_height.h"

#include <capstone/capstone.h>

#include <algorithm>
#include <map>
#include <optional>
#include <span>

namespace bpfprof {
namespace {

// The state before an instruction. `height`: bytes pushed since the entry (CFA = rsp + 8 +
// height); `frame_height`: the height at which rbp was set to rsp (-1: it was not).
struct HeightState {
  int64_t height = 0;
  InferredRbp rbp = InferredRbp::kSame;
  int64_t rbp_saved_height = 0;  // for kSaved: rbp is at CFA - 8 - rbp_saved_height
  int64_t frame_height = -1;

  bool operator==(const HeightState&) const = default;
  // As at a function's entry: what a return or a tail call must leave.
  bool at_entry() const { return height == 0 && rbp == InferredRbp::kSame; }
};

bool is_reg(const cs_x86_op& op, x86_reg reg) { return op.type == X86_OP_REG && op.reg == reg; }

bool is_stack_pointer(uint16_t reg) {
  return reg == X86_REG_RSP || reg == X86_REG_ESP || reg == X86_REG_SP || reg == X86_REG_SPL;
}
bool is_frame_pointer(uint16_t reg) {
  return reg == X86_REG_RBP || reg == X86_REG_EBP || reg == X86_REG_BP || reg == X86_REG_BPL;
}

// What one instruction does to the state: the state after it (nullopt: it breaks the
// conditions), and whether execution goes on to the next instruction.
struct Step {
  std::optional<HeightState> next;
  bool falls_through = true;
  std::optional<uint64_t> branch_target;  // a direct jump's

  bool returns = false;  // a return or a tail call, which checked that nothing is left pushed

  static Step on(HeightState state) { return {state, true, std::nullopt}; }
  static Step ends(HeightState state) { return {state, false, std::nullopt}; }
  static Step returned(HeightState state, bool falls_through = false) {
    return {state, falls_through, std::nullopt, true};
  }
  static Step broken() { return {std::nullopt, false, std::nullopt}; }
};

class Reader {
 public:
  Reader(csh handle, uint64_t start, uint64_t end, const IsFunctionEntry& is_function_entry)
      : handle_(handle), start_(start), end_(end), is_function_entry_(is_function_entry) {}

  Step step(const cs_insn& insn, HeightState state) const {
    const cs_x86& x86 = insn.detail->x86;
    const bool jump = cs_insn_group(handle_, &insn, X86_GRP_JUMP);
    if (insn.id == X86_INS_CALL) return Step::on(state);
    if (insn.id == X86_INS_RET)  // `ret imm16` pops more than the return address
      return x86.op_count == 0 && state.at_entry() ? Step::returned(state) : Step::broken();
    if (jump) return jump_step(x86, state, insn.id == X86_INS_JMP);
    if (insn.id == X86_INS_UD2 || insn.id == X86_INS_HLT) return Step::ends(state);
    if (insn.id == X86_INS_PUSH || insn.id == X86_INS_POP)
      return lose_freed_rbp(push_or_pop(insn.id == X86_INS_PUSH, x86, state));
    if (insn.id == X86_INS_LEAVE) {
      if (state.frame_height < 8 || state.rbp != InferredRbp::kSaved ||
          state.rbp_saved_height != state.frame_height)
        return Step::broken();
      return Step::on(HeightState{state.frame_height - 8, InferredRbp::kSame, 0, -1});
    }
    return lose_freed_rbp(other(insn, state));
  }

 private:
  // Below the slot that held the caller's rbp, and not by `pop %rbp`: it is gone.
  static Step lose_freed_rbp(Step step) {
    if (step.next && step.next->rbp == InferredRbp::kSaved &&
        step.next->height < step.next->rbp_saved_height)
      step.next->rbp = InferredRbp::kUnknown;
    return step;
  }

  Step jump_step(const cs_x86& x86, HeightState state, bool unconditional) const {
    const bool direct = x86.op_count == 1 && x86.operands[0].type == X86_OP_IMM;
    if (direct) {
      const auto target = static_cast<uint64_t>(x86.operands[0].imm);
      if (target >= start_ && target < end_) return {state, !unconditional, target};
      if (!is_function_entry_(target)) return Step::broken();  // into another function's body
    }
    // A tail call (direct out of the code, or indirect): nothing may be left pushed.
    if (!state.at_entry()) return Step::broken();
    return Step::returned(state, !unconditional);
  }

  // 8 bytes each (a 16-bit push or pop breaks the conditions).
  static Step push_or_pop(bool is_push, const cs_x86& x86, HeightState state) {
    if (x86.op_count != 1) return Step::broken();
    const cs_x86_op& op = x86.operands[0];
    if ((op.type != X86_OP_IMM && op.size != 8) || is_reg(op, X86_REG_RSP)) return Step::broken();
    if (is_push) {
      state.height += 8;
      if (is_reg(op, X86_REG_RBP) && state.rbp == InferredRbp::kSame) {
        state.rbp = InferredRbp::kSaved;
        state.rbp_saved_height = state.height;
      }
      return Step::on(state);
    }
    if (state.height < 8) return Step::broken();
    if (is_reg(op, X86_REG_RBP)) {
      const bool restores =
          state.rbp == InferredRbp::kSaved && state.rbp_saved_height == state.height;
      state.rbp = restores                           ? InferredRbp::kSame
                  : state.rbp == InferredRbp::kSaved ? InferredRbp::kSaved
                                                     : InferredRbp::kUnknown;
      state.frame_height = -1;
    }
    state.height -= 8;
    return Step::on(state);
  }

  // Any other instruction: `sub`/`add rsp, imm`, `mov rbp, rsp` and `mov rsp, rbp` are
  // followed; another write to rsp breaks the conditions; one to rbp loses the caller's rbp
  // unless it was saved.
  Step other(const cs_insn& insn, HeightState state) const {
    const cs_x86& x86 = insn.detail->x86;
    const bool two_regs = x86.op_count == 2 && x86.operands[0].type == X86_OP_REG;
    if (two_regs && x86.operands[0].reg == X86_REG_RSP && x86.operands[1].type == X86_OP_IMM &&
        (insn.id == X86_INS_SUB || insn.id == X86_INS_ADD)) {
      state.height += insn.id == X86_INS_SUB ? x86.operands[1].imm : -x86.operands[1].imm;
      return state.height >= 0 ? Step::on(state) : Step::broken();
    }
    if (insn.id == X86_INS_MOV && two_regs && is_reg(x86.operands[1], X86_REG_RSP) &&
        x86.operands[0].reg == X86_REG_RBP) {
      if (state.rbp == InferredRbp::kSame) state.rbp = InferredRbp::kUnknown;
      state.frame_height = state.height;
      return Step::on(state);
    }
    if (insn.id == X86_INS_MOV && two_regs && is_reg(x86.operands[1], X86_REG_RBP) &&
        x86.operands[0].reg == X86_REG_RSP) {
      if (state.frame_height < 0) return Step::broken();
      state.height = state.frame_height;
      return Step::on(state);
    }
    cs_regs read, written;
    uint8_t read_count = 0, written_count = 0;
    if (cs_regs_access(handle_, &insn, read, &read_count, written, &written_count) != CS_ERR_OK)
      return Step::broken();
    for (uint8_t i = 0; i < written_count; ++i) {
      if (is_stack_pointer(written[i])) return Step::broken();
      if (is_frame_pointer(written[i])) {
        if (state.rbp == InferredRbp::kSame) state.rbp = InferredRbp::kUnknown;
        state.frame_height = -1;
      }
    }
    return Step::on(state);
  }

  csh handle_;
  uint64_t start_;
  uint64_t end_;
  const IsFunctionEntry& is_function_entry_;
};

struct Decoded {
  uint64_t address = 0;
  uint64_t end = 0;
  HeightState state;
};

std::vector<InferredSpan> spans_of(const std::vector<Decoded>& decoded) {
  std::vector<InferredSpan> spans;
  for (const Decoded& d : decoded) {
    InferredSpan span{d.address, d.end, static_cast<uint32_t>(8 + d.state.height), d.state.rbp,
                      d.state.rbp == InferredRbp::kSaved
                          ? static_cast<int32_t>(-8 - d.state.rbp_saved_height)
                          : 0};
    if (!spans.empty() && spans.back().end == span.start &&
        spans.back().cfa_offset == span.cfa_offset && spans.back().rbp == span.rbp &&
        spans.back().rbp_offset == span.rbp_offset)
      spans.back().end = span.end;
    else
      spans.push_back(span);
  }
  return spans;
}

// Reads the code in order; nullopt where it breaks the conditions (stack_height.h).
std::optional<std::vector<Decoded>> read_code(const X86Decoder& decoder, uint64_t address,
                                              std::span<const uint8_t> code,
                                              const IsFunctionEntry& is_function_entry) {
  Reader reader(decoder.handle(), address, address + code.size(), is_function_entry);
  std::vector<Decoded> decoded;
  std::map<uint64_t, HeightState> branched;  // the state that direct branches bring to an address
  std::optional<HeightState> state;  // none: what comes next is guessed to be a function's entry
  // Code read as a function's entry must reach a return or a tail call, which checks it,
  // before the next such guess: a cold part that ends calling abort is not an entry.
  bool guess_unchecked = false;
  uint64_t guess_start = address;
  bool ok = true;
  const auto broken = [&ok] {  // stops the read
    ok = false;
    return true;
  };
  const auto read = decoder.read(code, address, [&](const cs_insn& insn) {
    const uint64_t here = insn.address;
    if (auto it = branched.find(here); it != branched.end()) {
      if (state && !(*state == it->second)) return broken();
      state = it->second;
    }
    // Alignment fill between functions is not run: it starts no guess.
    if (!state && (insn.id == X86_INS_NOP || insn.id == X86_INS_INT3)) return false;
    if (!state) {  // after a return or a jump: a function's entry
      if (guess_unchecked) return broken();
      state = HeightState{};
      guess_unchecked = true;
      guess_start = here;
    }
    decoded.push_back({here, here + insn.size, *state});
    const Step step = reader.step(insn, *state);
    if (!step.next) return broken();
    // So does a jump back into code read before this guess (frame_dummy's tail call to
    // register_tm_clones): the state there was read with its own check.
    if (step.returns || (step.branch_target && *step.branch_target < guess_start))
      guess_unchecked = false;
    if (step.branch_target) {
      auto [it, inserted] = branched.try_emplace(*step.branch_target, *step.next);
      if (!inserted && !(it->second == *step.next)) return broken();
    }
    state = step.falls_through ? step.next : std::nullopt;
    return false;
  });
  if (read == X86Decoder::Read::kUndecodable) ok = false;
  if (!ok || guess_unchecked) return std::nullopt;
  // Every branch target is an instruction read with the state the branch brings.
  for (const auto& [target, brought] : branched) {
    auto it = std::lower_bound(decoded.begin(), decoded.end(), target,
                               [](const Decoded& d, uint64_t a) { return d.address < a; });
    if (it == decoded.end() || it->address != target || !(it->state == brought))
      return std::nullopt;
  }
  return decoded;
}

}  // namespace

std::vector<InferredSpan> StackHeightReader::infer(uint64_t address, const uint8_t* code,
                                                   size_t size,
                                                   const IsFunctionEntry& is_function_entry) const {
  if (!decoder_.usable() || code == nullptr || size == 0) return {};
  std::optional<std::vector<Decoded>> decoded =
      read_code(decoder_, address, {code, size}, is_function_entry);
  return decoded ? spans_of(*decoded) : std::vector<InferredSpan>{};
}

}  // namespace bpfprof
