// Unwind rules for x86-64 code that no CFI covers, read from its instructions: crtstuff's
// functions (deregister_tm_clones, register_tm_clones, __do_global_dtors_aux, frame_dummy),
// which every gcc-built program and library has without an FDE, and which run at each load
// and exit. A sample there was cut at them ([truncated]).
//
// The code is read in order (Capstone) as functions entered with only their return address on
// the stack, keeping the stack height and where rbp is saved. Every instruction that moves rsp
// must be a push, pop, `sub`/`add rsp, imm`, call, ret or leave; a return or a tail call must
// leave nothing pushed; and every direct branch into the code must find there the state it
// left with; a direct jump out of it must go to a function's entry. Anything else, and the whole
// range gets no rules: code after a call that does not return, reached only through a jump table,
// or that keeps its frame some other way is left uncovered, never guessed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "symbols/util/x86_decoder.h"

namespace bpfprof {

// Where the caller's rbp is: still in rbp, saved at CFA + rbp_offset, or lost (overwritten
// without being saved first).
enum class InferredRbp : uint8_t { kSame, kSaved, kUnknown };

// [start, end) in the file's virtual addresses: CFA = rsp + cfa_offset, the return address at
// CFA - 8.
struct InferredSpan {
  uint64_t start = 0;
  uint64_t end = 0;
  uint32_t cfa_offset = 8;
  InferredRbp rbp = InferredRbp::kSame;
  int32_t rbp_offset = 0;  // for kSaved
};

// Whether the code at an address outside the range is entered as a function is (its rules
// say CFA = rsp + 8): a direct jump there is a tail call; one elsewhere breaks the conditions.
using IsFunctionEntry = std::function<bool(uint64_t address)>;

// Reads ranges of code with one decoder, opened once: opening Capstone costs ~20 us, more than
// reading a gap's few instructions (a large library has a thousand such gaps).
class StackHeightReader {
 public:
  // The rules of the `size` bytes of code at `address`, split where they change; empty when
  // any instruction breaks the conditions above (or cannot be decoded, or Capstone is missing).
  std::vector<InferredSpan> infer(uint64_t address, const uint8_t* code, size_t size,
                                  const IsFunctionEntry& is_function_entry) const;

 private:
  X86Decoder decoder_;
};

}  // namespace bpfprof
