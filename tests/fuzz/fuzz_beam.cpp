// libFuzzer target for what bpfprof reads of a BEAM emulator (runtimes/beam): its code index,
// range tables, module headers, MFAs and atoms are the profiled process's to write, and the
// instructions decoded to find the range tables are the binary's. The first 48 bytes choose
// the addresses (code index, range tables, atom table) and pcs; the rest is a pretend process
// image at kImageAt, and also the code decoded, and a record of the JIT's GDB list (and the
// list itself, with its descriptor in the image). A pc is named within the bounds or not at
// all; never a crash, a hang or a read outside the image.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string>

#include "runtimes/beam/binary.h"
#include "runtimes/beam/code_index.h"
#include "runtimes/beam/jit_list.h"
#include "runtimes/beam/names.h"

using namespace bpfprof;

namespace {
constexpr uint64_t kImageAt = 0x10000;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 48) return 0;
  uint32_t choices[12];
  memcpy(choices, data, sizeof(choices));
  const std::span<const uint8_t> image(data + 48, size - 48);
  if (const auto ranges = decode_find_range(image, kImageAt))
    if (!ranges->active_code_index || !ranges->ranges || ranges->stride_shift >= 16) abort();
  first_call_target(image, kImageAt);
  only_call_return(image, kImageAt, kImageAt + choices[0] % 4096);
  has_imul_by(image, kImageAt, 0xa300);
  if (const auto range = jit_record_range(image, "global", "global::process_main"))
    if (range->start >= range->end) abort();
  BufferMemory memory;
  memory.place(kImageAt, std::string(reinterpret_cast<const char*>(image.data()), image.size()));
  const uint64_t span = image.size() + 64;
  BeamCodeIndex index(kErts13_1, {kImageAt + choices[0] % span, kImageAt + choices[1] % span,
                                  kImageAt + choices[2] % span});
  RemoteReader reader(memory, 1 << 20, 0);
  for (size_t i = 3; i < 12; ++i) {
    const uint64_t pc = kImageAt + choices[i] % span;
    if (const auto mfa = index.function_at(reader, pc)) {
      if (mfa->module.size() > kMaxBeamAtomBytes || mfa->function.size() > kMaxBeamAtomBytes ||
          mfa->arity > kMaxBeamArity)
        abort();
      if (beam_function_name(*mfa).size() > 4 * kMaxBeamAtomBytes + 16) abort();
    }
    if (i == 6) index.check_generation(reader);
  }
  if (const auto range =
          find_jit_range(reader, kImageAt + choices[11] % span, "global", "global::process_main"))
    if (range->start >= range->end) abort();
  return 0;
}
