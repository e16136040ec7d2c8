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
};

// An atom term: (index << 6) | 0x0b (erl_term.h's _TAG_IMMED2_ATOM).
inline constexpr uint64_t kBeamAtomTagMask = 0x3f;
inline constexpr uint64_t kBeamAtomTag = 0x0b;
inline constexpr uint32_t kBeamAtomsPerSegment = 1024;

}  // namespace bpfprof
