// libFuzzer target for V8's heap objects as bpfprof reads them from a node process
// (runtimes/v8/objects.h): all of it is the profiled process's to write. The first byte
// picks the limits (bit 0: tight ones) and the layout (bit 1: Node 24's V8 13, else Node 20's);
// the rest is a pretend heap at fake::kHeapAt
// (tests/unit/v8_fake_heap.h) whose first word is the SharedFunctionInfo to name. Functions, their
// names, scripts and line starts must be read or refused within the limits; never a crash, a hang
// or a read outside the image. The input is also decoded as a source position table.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "runtimes/v8/objects.h"
#include "tests/unit/v8_fake_heap.h"

using namespace bpfprof;
using namespace bpfprof::v8;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 9) return 0;
  V8ReadLimits limits;
  uint64_t budget = 1 << 20;
  if (data[0] & 1) {
    limits.max_name_chars = 16;
    limits.max_source_chars = 64;
    limits.max_string_depth = 4;
    budget = 4096;
  }
  fake::Reading reading(std::string(reinterpret_cast<const char*>(data + 1), size - 1), limits,
                        budget, data[0] & 2 ? fake::node24_layout() : fake::node20_layout());
  V8Heap& heap = reading.heap;
  const uint64_t shared = reading.reader.word(fake::kHeapAt).value_or(0);
  const auto info = heap.read_shared(shared);
  if (info && info->name.size() > 4 * limits.max_name_chars) abort();
  const uint64_t script = info ? info->script : shared;
  if (auto name = heap.script_name(script); name && name->size() > 16 * limits.max_name_chars)
    abort();
  if (auto starts = heap.script_line_starts(script);
      starts && starts->size() > limits.max_source_chars + 1)
    abort();
  if (auto positions = heap.bytecode_positions(heap.bytecode_of(shared).value_or(shared));
      positions && positions->size() > limits.max_position_table_bytes)
    abort();
  // The input itself as a source position table.
  if (auto positions = decode_source_positions(data + 1, size - 1)) {
    if (positions->size() > size) abort();
    for (size_t i = 1; i < positions->size(); ++i)
      if ((*positions)[i].code_offset < (*positions)[i - 1].code_offset) abort();
  }
  if (reading.reader.bytes_read() > budget) abort();
  return 0;
}
