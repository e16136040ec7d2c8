// libFuzzer target for the names of the Zend engine's functions as bpfprof reads them from a
// PHP process (runtimes/php/names.h): all of it is the profiled process's to write. The first
// 32 bytes are the frame the BPF side sent (name, scope and filename addresses, type, call
// info, first line); the rest is a pretend process image at kImageAt. A name must be read or
// refused within its bound; never a crash, a hang or a read outside the image.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string>

#include "runtimes/php/jit_stubs.h"
#include "runtimes/php/names.h"

using namespace bpfprof;

namespace {
constexpr uint64_t kImageAt = 0x10000;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 32) return 0;
  uint32_t offsets[3];
  memcpy(offsets, data, sizeof(offsets));
  bpfprof_php_frame frame{};
  frame.name = offsets[0] % 3 == 0 ? 0 : kImageAt + offsets[0] % 4096;
  frame.scope = offsets[1] % 3 == 0 ? 0 : kImageAt + offsets[1] % 4096;
  frame.filename = offsets[2] % 3 == 0 ? 0 : kImageAt + offsets[2] % 4096;
  frame.type = data[12] % 5;
  frame.call_info = data[13];
  memcpy(&frame.line_start, data + 16, sizeof(frame.line_start));
  BufferMemory memory;
  memory.place(kImageAt, std::string(reinterpret_cast<const char*>(data + 32), size - 32));
  // The same bytes as the start of a JIT buffer: the stub scan stays inside them.
  const std::span<const uint8_t> code(data + 32, size - 32);
  if (const auto stub = find_trace_exit(code))
    if (stub->start >= stub->end || stub->end > code.size()) abort();
  RemoteReader reader(memory, 1 << 16, 0);
  if (const auto f = read_php_function(reader, kPhp82, frame)) {
    if (f->qualified_name.size() > 2 * kMaxPhpText + 8 || f->filename.size() > kMaxPhpText + 3)
      abort();
  }
  return 0;
}
