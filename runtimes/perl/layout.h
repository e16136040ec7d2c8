// Where a threaded perl (USE_ITHREADS, x86-64) keeps what names its running subs: the
// interpreter's current statement and context stacks (intrpvar.h, cop.h), a sub's CV, GV and
// stash (sv.h, cv.h, gv.h, hv.h), per release. Read off Debian 12's perl 5.36 headers and
// checked against live processes; docs/research/perl-interpreter.md has the derivation.
#pragma once

#include <cstdint>

#include "runtimes/kit/release.h"

namespace bpfprof {

using PerlVersion = RuntimeRelease;

struct PerlLayout {
  PerlVersion version;   // major.minor it covers
  uint16_t interp_size;  // PL_interp_size: sizeof(struct interpreter), a fingerprint
  // struct interpreter: PL_op, PL_curcop, PL_curstackinfo
  uint32_t interp_op;
  uint32_t interp_curcop;
  uint32_t interp_curstackinfo;
  // PERL_SI: si_cxstack, si_prev (the runlevel this one was pushed over), si_cxix (I32)
  uint32_t si_cxstack;
  uint32_t si_prev;
  uint32_t si_cxix;
  uint32_t si_type;
  uint32_t si_stack;
  // XPVAV: xav_fill
  uint32_t xav_fill;
  // PERL_CONTEXT: its size, cx_type (u8), blk_oldcop, blk_sub.cv, blk_sub.retop,
  // blk_eval.old_namesv, blk_eval.cv, blku_u16 (an eval's old op type above bit 7)
  uint32_t cx_size;
  uint32_t cx_type;
  uint32_t cx_u16;
  uint32_t cx_oldcop;
  uint32_t cx_sub_retop;
  uint32_t cx_sub_cv;
  uint32_t cx_eval_namesv;
  uint32_t cx_eval_cv;
  // COP: cop_line (U32), cop_file (a char* in threaded builds)
  uint32_t cop_line;
  uint32_t cop_file;
  // SV head: sv_any, sv_flags; a PV's buffer (sv_u)
  uint32_t sv_any;
  uint32_t sv_flags;
  uint32_t sv_u;
  // XPVCV: xcv_stash, xcv_gv_u (a GV, or a HEK when CvNAMED), xcv_flags (U32)
  uint32_t xcv_stash;
  uint32_t xcv_gv_u;
  uint32_t xcv_flags;
  // XPVGV: xivu_namehek, xgv_stash; GP: gp_cv, gp_egv
  uint32_t xgv_namehek;
  uint32_t xgv_stash;
  uint32_t gp_cv;
  uint32_t gp_egv;
  // xpvhv_with_aux: xhv_aux, the aux struct itself in the body (when SVf_OOK); xpvhv_aux:
  // xhv_name_u, xhv_name_count (I32)
  uint32_t xhv_aux;
  uint32_t aux_name_u;
  uint32_t aux_name_count;
  // HEK: hek_len (I32), hek_key
  uint32_t hek_len;
  uint32_t hek_key;
};

inline constexpr PerlLayout kPerl5_36{
    .version = {5, 36, 0},
    .interp_size = 3768,
    .interp_op = 0x08,
    .interp_curcop = 0xd0,
    .interp_curstackinfo = 0xe0,
    .si_cxstack = 0x08,
    .si_prev = 0x10,
    .si_cxix = 0x20,
    .si_type = 0x2c,
    .si_stack = 0x00,
    .xav_fill = 0x10,
    .cx_size = 0x68,
    .cx_type = 0x00,
    .cx_u16 = 0x02,
    .cx_oldcop = 0x10,
    .cx_sub_retop = 0x30,
    .cx_sub_cv = 0x48,
    .cx_eval_namesv = 0x40,
    .cx_eval_cv = 0x58,
    .cop_line = 0x24,
    .cop_file = 0x30,
    .sv_any = 0x00,
    .sv_flags = 0x0c,
    .sv_u = 0x10,
    .xcv_stash = 0x20,
    .xcv_gv_u = 0x38,
    .xcv_flags = 0x5c,
    .xgv_namehek = 0x20,
    .xgv_stash = 0x28,
    .gp_cv = 0x10,
    .gp_egv = 0x38,
    .xhv_aux = 0x20,
    .aux_name_u = 0x00,
    .aux_name_count = 0x1c,
    .hek_len = 4,
    .hek_key = 8,
};

// Context types (cop.h: CXTYPEMASK) and flags, SV types (sv.h) and flags, CV flags (cv.h).
inline constexpr uint8_t kPerlCxTypeMask = 0xf;
inline constexpr uint8_t kPerlCxSub = 9;
inline constexpr uint8_t kPerlCxFormat = 10;
inline constexpr uint8_t kPerlCxEval = 11;
inline constexpr uint8_t kPerlCxSubReFake = 0x80;  // a regex code block's: hidden, as caller does
inline constexpr uint8_t kPerlCxEvalReal = 0x20;   // eval "string"
inline constexpr uint8_t kPerlCxEvalBlock = 0x40;  // eval {} and try
inline constexpr uint32_t kPerlSvTypeMask = 0x1f;
inline constexpr uint32_t kPerlSvPvgv = 9;
inline constexpr uint32_t kPerlSvPvhv = 12;
inline constexpr uint32_t kPerlSvPvcv = 13;
inline constexpr uint32_t kPerlSvpGvGp = 0x8000;
inline constexpr uint32_t kPerlSvfRok = 0x800;  // a reference: sv_u is what it refers to
inline constexpr uint32_t kPerlSvfOok = 0x02000000;
inline constexpr uint32_t kPerlCvIsXsub = 0x8;
inline constexpr uint32_t kPerlCvNamed = 0x8000;
inline constexpr uint32_t kPerlCvLexical = 0x10000;
// Op types (opnames.h in 5.36): an eval's old op type (blku_u16 >> 7) for require; the op
// running while an XSUB is called. op_type is the low 9 bits of the u16 at kPerlOpTypeOffset.
inline constexpr uint32_t kPerlOpRequire = 342;
inline constexpr uint32_t kPerlOpEntersub = 184;
inline constexpr uint32_t kPerlOpTypeOffset = 0x20;
// struct interpreter's first member, PL_stack_sp
inline constexpr uint32_t kPerlInterpStackSp = 0;

}  // namespace bpfprof
