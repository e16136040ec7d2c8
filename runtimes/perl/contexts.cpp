#include "runtimes/perl/contexts.h"

#include <cstring>

namespace bpfprof {
namespace {

// The frame of one context, if it is one a stack shows (subs, formats, evals); `cop` is the
// statement the context's code was running.
std::optional<PerlContextFrame> context_frame(const PerlLayout& l, const uint8_t* cx,
                                              uint64_t cop) {
  auto word = [&](uint32_t offset) {
    uint64_t v;
    memcpy(&v, cx + offset, 8);
    return v;
  };
  const uint8_t type_byte = cx[l.cx_type];
  const uint8_t type = type_byte & kPerlCxTypeMask;
  if ((type == kPerlCxSub && !(type_byte & kPerlCxSubReFake)) || type == kPerlCxFormat)
    return PerlContextFrame{PerlFrameKind::kSub, word(l.cx_sub_cv), 0, cop,
                            word(l.cx_sub_retop) == 0};
  if (type != kPerlCxEval) return std::nullopt;
  uint16_t u16;
  memcpy(&u16, cx + l.cx_u16, 2);
  if ((u16 >> 7) == kPerlOpRequire && !(type_byte & (kPerlCxEvalReal | kPerlCxEvalBlock)))
    return PerlContextFrame{PerlFrameKind::kRequire, 0, word(l.cx_eval_namesv), cop, false};
  return PerlContextFrame{PerlFrameKind::kEval, word(l.cx_eval_cv), 0, cop, false};
}

// One runlevel's contexts, from its top down, into `stack`; the statement outside them.
// False when it does not read as one.
bool read_runlevel(RemoteReader& reader, const PerlLayout& l, uint64_t si, uint64_t& cop,
                   PerlContextStack& stack) {
  const std::optional<uint64_t> cxstack = reader.word(si + l.si_cxstack);
  const std::optional<int32_t> top = reader.value<int32_t>(si + l.si_cxix);
  if (!cxstack || !top || *top < -1 || *cxstack & 7) return false;
  for (int32_t i = *top; i >= 0; --i) {
    std::vector<uint8_t> cx(l.cx_size);
    if (!reader.read(*cxstack + uint64_t(i) * l.cx_size, cx.data(), cx.size())) return false;
    const std::optional<PerlContextFrame> frame = context_frame(l, cx.data(), cop);
    if (!frame) continue;
    if (stack.frames.size() >= kMaxPerlFrames) return false;
    stack.frames.push_back(*frame);
    memcpy(&cop, cx.data() + l.cx_oldcop, 8);
  }
  return true;
}

}  // namespace

PerlContextStack read_perl_contexts(RemoteReader& reader, const PerlLayout& l,
                                    uint64_t interpreter) {
  PerlContextStack stack;
  std::optional<uint64_t> cop = reader.word(interpreter + l.interp_curcop);
  std::optional<uint64_t> si = reader.word(interpreter + l.interp_curstackinfo);
  if (!cop || !si) return stack;
  uint64_t statement = *cop;
  for (uint32_t level = 0; *si; ++level) {
    if (level >= kMaxPerlRunlevels || !read_runlevel(reader, l, *si, statement, stack))
      return stack;
    si = reader.word(*si + l.si_prev);
    if (!si) return stack;
  }
  stack.frames.push_back(PerlContextFrame{PerlFrameKind::kFile, 0, 0, statement, false});
  stack.complete = true;
  return stack;
}

}  // namespace bpfprof
