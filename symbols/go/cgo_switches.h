// Where Go moves a thread between a goroutine's stack and its system stack (g0), read from
// the code of the runtime functions that switch: asmcgocall, which runs a C function on the
// system stack, cgocallback, which runs Go called back from C on the goroutine's, and
// systemstack, which runs runtime code on the system stack. Go's own traceback ends at all
// three; the kernel walk follows them (bpf/unwind_table.h's BPFPROF_CFA_GO_CGO_CALL,
// _CALLBACK and BPFPROF_CFA_GO_SYSTEMSTACK), so a C function's stack goes on into the
// goroutine that called it, a callback's into the C code that called back, and the runtime's
// work on the system stack (the garbage collector's, large allocations') into the goroutine
// it was done for.
//
// The offsets the walk needs (stack slots, struct fields, the thread-pointer offset of g) are
// taken from the instructions themselves, and a function whose code is not of a known shape
// gives nothing: its frames stay where Go's traceback ends. The code comes from any binary,
// so every read is bounded.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "symbols/go/pclntab.h"

namespace bpfprof::go {

// Fields of Go's runtime structures the kernel walk reads at a switch (runtime/runtime2.go, the
// same since Go 1.5), found in the instructions before a switch is given; bpf/unwind_table.h
// says the same to the BPF side (symbols/dwarf/go_spans.cpp checks that they agree).
inline constexpr uint8_t kGStackHi = 0x08;  // g.stack.hi (g.stack.lo at 0)
inline constexpr uint8_t kGM = 0x30;        // g.m
inline constexpr uint8_t kMG0 = 0x00;       // m.g0
inline constexpr uint8_t kGSchedSp = 0x38;  // g.sched.sp

enum class CgoSwitchKind : uint8_t {
  // asmcgocall's call of the C function, on the system stack: [sp + slot] is the goroutine's
  // stack depth (g.stack.hi - its sp) and [sp + slot + 8] its g, or 0 and [sp + slot] the sp
  // itself when the call was made on the system stack already.
  kCallIntoC,
  // cgocallback's call into Go, in a frame on the goroutine's stack made the size of its
  // frame on the system stack, whose sp g0.sched.sp keeps; slot: g's offset from the thread
  // pointer (fs).
  kCallbackIntoGo,
  // systemstack's call of a function on the system stack: the goroutine's frame is at m.curg's
  // sched.sp (curg_offset: m.curg's offset), g from the thread pointer + slot, as for
  // kCallbackIntoGo.
  kSystemStack,
};

struct CgoSwitch {
  CgoSwitchKind kind = CgoSwitchKind::kCallIntoC;
  uint64_t return_address = 0;  // just past the call, in the binary's virtual addresses
  int32_t cfa_offset = 0;       // the frame switched to: its CFA minus its sp
  bool rbp_saved = false;       // the caller's rbp is at that CFA - 16
  int32_t slot = 0;
  uint32_t curg_offset = 0;  // kSystemStack only
  bool rbp_lost = false;     // the caller's rbp is not known past the switch
};

// The switches in one function's code (`code` starting at `entry`; `layout` its pcsp table),
// for the functions named runtime.asmcgocall, runtime.cgocallback and runtime.systemstack;
// and runtime.morestack, whose call of newstack on the system stack goes back to the goroutine
// that grows its stack as systemstack's does (`systemstack`: the binary's systemstack switch,
// whose g slot and m.curg offset it takes); none for any other.
std::vector<CgoSwitch> find_cgo_switches(std::string_view name, uint64_t entry,
                                         std::span<const uint8_t> code, const FrameLayout& layout,
                                         const CgoSwitch* systemstack = nullptr);

// Bytes of the binary at a virtual address (fewer, or none, where its file has none).
using ReadCode = std::function<std::vector<uint8_t>(uint64_t vaddr, uint64_t size)>;

// The binary's systemstack switch, if it has one of a known shape: where morestack's goes
// back to, and where a thread's g (its thread-pointer slot) and m.curg are.
std::optional<CgoSwitch> systemstack_switch(const GoTable& table, const ReadCode& code);

}  // namespace bpfprof::go
