// A perl interpreter's Perl frames, read from another process (untrusted memory): from the
// current statement (PL_curcop) out along each runlevel's context stack (PL_curstackinfo,
// si_prev outward), a frame for each sub, format and eval context, each at the statement it
// was running (the innermost's PL_curcop, an outer one's the call's blk_oldcop), then the
// file-level code. What Perl's own caller() walks.
#pragma once

#include <cstdint>
#include <vector>

#include "runtimes/kit/remote_memory.h"
#include "runtimes/perl/layout.h"

namespace bpfprof {

inline constexpr uint32_t kMaxPerlRunlevels = 8;
inline constexpr uint32_t kMaxPerlFrames = 128;

enum class PerlFrameKind {
  kSub,      // a sub or format: `cv`
  kEval,     // eval {} or eval "" (`cv` its code for a string eval)
  kRequire,  // require/use of a file: `namesv` its %INC key
  kFile,     // the file-level code: the outermost frame
};

struct PerlContextFrame {
  PerlFrameKind kind = PerlFrameKind::kSub;
  uint64_t cv = 0;
  uint64_t namesv = 0;
  uint64_t cop = 0;            // the statement it was running
  bool called_from_c = false;  // a sub whose retop is 0: entered by call_sv (sort, BEGIN, XS)
};

struct PerlContextStack {
  std::vector<PerlContextFrame> frames;  // innermost first
  bool complete = false;  // read to the file-level code, not cut by a read or a bound
};

// The frames of the interpreter at `interpreter` (a my_perl).
PerlContextStack read_perl_contexts(RemoteReader& reader, const PerlLayout& layout,
                                    uint64_t interpreter);

}  // namespace bpfprof
