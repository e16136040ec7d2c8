// Perl subs and statements named from another process's memory (untrusted): a CV's name as
// Perl's own caller() gives it (Perl_cv_name's rules: a named CV's HEK and stash, else its GV,
// or the GV it is an alias of, and the GV's stash), and a statement's (COP's) file and line.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "runtimes/kit/remote_memory.h"
#include "runtimes/perl/layout.h"

namespace bpfprof {

// Bounds on what a structure may claim: more is garbage, not read.
inline constexpr int32_t kMaxPerlNameBytes = 1024;
inline constexpr size_t kMaxPerlFileBytes = 4096;
inline constexpr int32_t kMaxPerlStashNames = 64;

struct PerlSub {
  std::string name;   // "Package::sub", "main::__ANON__", a lexical sub's bare name
  bool xsub = false;  // its body is C (Digest::SHA::sha256)
  bool operator==(const PerlSub&) const = default;
};

// The sub whose CV is at `cv`; nullopt when the memory does not read as a CV with a name.
std::optional<PerlSub> read_perl_sub(RemoteReader& reader, const PerlLayout& layout, uint64_t cv);

// The sub a frame ran, read after it: the CV at `cv` if it still has the name `gv_u` it had
// then (xcv_gv_u), else, the CV freed or reused since, the GV's name alone (a BEGIN's GV stays
// in its package).
std::optional<std::string> read_perl_frame_sub(RemoteReader& reader, const PerlLayout& layout,
                                               uint64_t cv, uint64_t gv_u);

// The XSUB an entersub called, from the SV it took (a CV, a GV whose CV it is, or a reference
// to a CV); nullopt when it is not one (a Perl sub, or the slot was written over).
std::optional<PerlSub> read_perl_xsub(RemoteReader& reader, const PerlLayout& layout, uint64_t sv);

// A statement's source position.
struct PerlStatement {
  std::string file;  // "t.pl", "/usr/share/perl/5.36/Exporter.pm", "(eval 3)"
  uint32_t line = 0;
};
std::optional<PerlStatement> read_perl_statement(RemoteReader& reader, const PerlLayout& layout,
                                                 uint64_t cop);

// A stash's (package's) name, HvNAME: nullopt for a stash without one.
std::optional<std::string> read_perl_stash_name(RemoteReader& reader, const PerlLayout& layout,
                                                uint64_t stash);

}  // namespace bpfprof
