// libFuzzer target for what bpfprof reads of a perl interpreter (runtimes/perl): its context
// stacks, subs' CVs, GVs, stashes and HEKs, and statements' files are the profiled process's to
// write. The first 8 bytes choose the interpreter's address; the rest is a pretend process
// image at kImageAt. Frames and names are read within their bounds or refused; never a crash,
// a hang or a read outside the image.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "runtimes/perl/contexts.h"
#include "runtimes/perl/names.h"

using namespace bpfprof;

namespace {
constexpr uint64_t kImageAt = 0x10000;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 8) return 0;
  uint32_t choices[2];  // the interpreter's and a stash's (or SV's, GV's) offsets
  memcpy(choices, data, sizeof(choices));
  BufferMemory memory;
  memory.place(kImageAt, std::string(reinterpret_cast<const char*>(data + 8), size - 8));
  RemoteReader reader(memory, 1 << 20, kMaxPerlFileBytes);
  const uint64_t span = size + 64;
  const PerlContextStack stack =
      read_perl_contexts(reader, kPerl5_36, kImageAt + (choices[0] % span & ~7u));
  if (stack.frames.size() > kMaxPerlFrames + 1) abort();
  for (const PerlContextFrame& frame : stack.frames) {
    if (const auto sub = read_perl_sub(reader, kPerl5_36, frame.cv))
      if (sub->name.empty() || sub->name.size() > 3 * kMaxPerlNameBytes + 16) abort();
    if (const auto statement = read_perl_statement(reader, kPerl5_36, frame.cop))
      if (statement->file.size() > kMaxPerlFileBytes) abort();
  }
  const uint64_t other = kImageAt + choices[1] % span;
  if (const auto name = read_perl_stash_name(reader, kPerl5_36, other))
    if (name->empty() || name->size() > kMaxPerlNameBytes) abort();
  // What the kernel side sends: an entersub's SV, a frame's CV and name key.
  if (const auto xsub = read_perl_xsub(reader, kPerl5_36, other))
    if (!xsub->xsub || xsub->name.empty() || xsub->name.size() > 3 * kMaxPerlNameBytes + 16)
      abort();
  if (const auto sub =
          read_perl_frame_sub(reader, kPerl5_36, kImageAt + (choices[0] % span & ~7u), other & ~7u))
    if (sub->empty() || sub->size() > 3 * kMaxPerlNameBytes + 16) abort();
  return 0;
}
