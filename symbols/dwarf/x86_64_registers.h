// x86-64's DWARF register numbers (the psABI's: rax rdx rcx rbx rsi rdi rbp rsp r8-r15, then
// the return address, rip), as CFI names them: the stack copies' unwinder hands libdwfl a
// thread's registers in this order, and the unwind tables read the rules of these.
#pragma once

namespace bpfprof {

inline constexpr int kDwarfRax = 0;
inline constexpr int kDwarfRbx = 3;
inline constexpr int kDwarfRdi = 5;
inline constexpr int kDwarfRbp = 6;
inline constexpr int kDwarfRsp = 7;
inline constexpr int kDwarfRip = 16;
inline constexpr int kDwarfUserRegisters = 17;  // rax to rip

}  // namespace bpfprof
