// Where the BEAM (Erlang/OTP's emulator, x86-64 JIT) keeps what names its code, per ERTS
// release: the code index's range tables (beam_ranges.c), a JIT module's header and its
// functions' ErtsCodeInfo (beam_code.h), the MFA (code_ix.h) and the atom table (atom.h,
// index.h). Read off OTP 25.2.3's sources (ERTS 13.1.5, Debian 12's erlang-base) and checked
// against the instructions of its beam.smp that use them (binary.cpp checks them again in
// each binary); docs/research/beam-jit.md has the derivation.
#pragma once

#include <cstdint>

#include "runtimes/kit/release.h"

namespace bpfprof {

using ErtsVersion = RuntimeRelease;

struct BeamLayout {
  ErtsVersion version;  // major.minor it covers
  // struct ranges {Range* modules; Sint n; Sint allocated; erts_atomic_t mid;}, one per code
  // index; Range {ErtsCodePtr start; erts_atomic_t end;}
  uint32_t ranges_size;
  uint32_t ranges_modules;
  uint32_t ranges_count;
  uint32_t range_size;
  uint32_t range_start;
  uint32_t range_end;
  // BeamCodeHeader: num_functions (Uint), functions[num_functions + 1] (ErtsCodeInfo*)
  uint32_t header_num_functions;
  uint32_t header_functions;
  // ErtsCodeInfo's MFA; ErtsCodeMFA {Eterm module; Eterm function; Uint arity;}
  uint32_t code_info_mfa;
  uint32_t mfa_module;
  uint32_t mfa_function;
  uint32_t mfa_arity;
  // IndexTable's seg_table (Atom** per 1024 atoms); Atom's len (Sint16) and name (a pointer to
  // its UTF-8 bytes, not NUL-terminated)
  uint32_t atom_table_segments;
  uint32_t atom_length;
  uint32_t atom_name;
  // ErtsAlignedSchedulerData's size; ErtsSchedulerData's registers, tid, current_process
  uint32_t scheduler_stride;
  uint32_t esdp_registers;
  uint32_t esdp_tid;
  uint32_t esdp_current_process;
  // The JIT's process_main keeps the return address it was entered with in
  // [registers + root_slot_low, + 8 words) (its `sub $0x4110,%rsp; and $-64,%rsp`).
  uint32_t root_slot_low;
  // Process: common.id, common.u.alive.reg (RegProc*, its name at regproc_name), stop, heap,
  // hend, current (erl_process.h, erl_ptab.h)
  uint32_t process_id;
  uint32_t process_reg;
  uint32_t process_stop;
  uint32_t process_heap;
  uint32_t process_hend;
  uint32_t process_current;
  uint32_t regproc_name;
};

inline constexpr BeamLayout kErts13_1{
    .version = {13, 1, 0},
    .ranges_size = 32,
    .ranges_modules = 0,
    .ranges_count = 8,
    .range_size = 16,
    .range_start = 0,
    .range_end = 8,
    .header_num_functions = 0,
    .header_functions = 0x60,
    .code_info_mfa = 16,
    .mfa_module = 0,
    .mfa_function = 8,
    .mfa_arity = 16,
    .atom_table_segments = 120,
    .atom_length = 24,
    .atom_name = 32,
    .scheduler_stride = 0xa300,
    .esdp_registers = 0,
    .esdp_tid = 0x20,
    .esdp_current_process = 0xa8,
    .root_slot_low = 0x4110,
    .process_id = 0,
    .process_reg = 0x30,
    .process_stop = 0x58,
    .process_heap = 0x80,
    .process_hend = 0x88,
    .process_current = 0x1d8,
    .regproc_name = 0x20,
};

// An atom term: (index << 6) | 0x0b (erl_term.h's _TAG_IMMED2_ATOM).
inline constexpr uint64_t kBeamAtomTagMask = 0x3f;
inline constexpr uint64_t kBeamAtomTag = 0x0b;
inline constexpr uint32_t kBeamAtomsPerSegment = 1024;

}  // namespace bpfprof
