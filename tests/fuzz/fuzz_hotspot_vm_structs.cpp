// libFuzzer target for HotSpot's tables as bpfprof reads them from a JVM's memory
// (runtimes/hotspot): all of it is the profiled process's to write. The first byte picks the
// limits (bit 0: tight ones); the rest is a pretend process image as
// tests/unit/hotspot_fake_image.h lays it out: the 21 words libjvm's table symbols hold, then
// the memory they point into, whose first word is a Method* to name. The tables must parse
// or give an error, within the limits; a layout taken from them must name the Method or say
// why not, and give the walk's view of the code cache (code_cache.h) inside its bounds or say
// why not; a frame noted by the walk, with its words taken from the image, is named or not;
// never a crash, a hang or a read outside the image.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <variant>

#include "runtimes/hotspot/code_cache.h"
#include "runtimes/hotspot/layout.h"
#include "runtimes/hotspot/names.h"
#include "runtimes/hotspot/vm_structs.h"
#include "runtimes/kit/remote_memory.h"
#include "tests/unit/hotspot_fake_image.h"

using namespace bpfprof;
using namespace bpfprof::hotspot;

namespace {

// The walk's entry must lie inside the code cache it describes, its heaps in order.
void check_code_cache(RemoteMemory& memory, const HotSpotLayout& l) {
  RemoteReader reader(memory, 1 << 16, 256);
  const auto entry = read_code_cache(reader, l);
  if (reader.bytes_read() > (1 << 16)) abort();
  const auto* p = std::get_if<bpfprof_hotspot_process>(&entry);
  if (!p) {
    if (std::get<CodeCacheError>(entry).reason.empty()) abort();
    return;
  }
  if (p->heap_count < 1 || p->heap_count > BPFPROF_HOTSPOT_CODE_HEAPS) abort();
  if (p->interpreter_low < p->code_low || p->interpreter_high > p->code_high) abort();
  for (uint32_t i = 0; i < p->heap_count; ++i)
    if (p->heaps[i].low < p->code_low || p->heaps[i].high > p->code_high ||
        p->heaps[i].low >= p->heaps[i].high)
      abort();
  if (p->blob_code_begin > BPFPROF_HOTSPOT_BLOB_WINDOW - 8 ||
      p->compiled_method > BPFPROF_HOTSPOT_BLOB_WINDOW - 8)
    abort();
}

// A frame as the walk notes it, its words from the image (a Method*, a name pointer).
void name_frame(RemoteMemory& memory, const HotSpotLayout& l, RemoteReader& words) {
  JavaFrameNamer namer(memory, l);
  for (uint8_t kind = 0; kind <= BPFPROF_HOTSPOT_FRAME_STUB + 1; ++kind) {
    bpfprof_hotspot_frame frame{};
    frame.kind = kind;
    frame.method = words.word(fake::kImageAt).value_or(0);
    frame.aux = words.word(fake::kImageAt + 8).value_or(0);
    const auto names = namer.name(frame, words.word(fake::kImageAt + 16).value_or(0));
    if (names.size() > kMaxScopes) abort();
    for (const JavaFrameName& name : names)
      if (name.name.empty() || name.name.size() > 3 * 4096) abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  VmStructsLimits limits;
  if (data[0] & 1) {
    limits.max_entries = 64;
    limits.max_string_bytes = 32;
    limits.max_bytes = 8192;
  }
  const std::string_view image(reinterpret_cast<const char*>(data + 1), size - 1);
  BufferMemory memory;
  fake::load(image, memory);
  RemoteReader reader(memory, limits.max_bytes, limits.max_string_bytes);
  const VmStructsResult result = read_vm_structs(reader, fake::symbol_addresses(), limits);
  if (reader.bytes_read() > limits.max_bytes) abort();
  const auto* vm = std::get_if<VmStructs>(&result);
  if (!vm) {
    if (std::get<VmStructsError>(result).message.empty()) abort();
    return 0;
  }
  if (vm->field_count() > limits.max_entries || vm->type_count() > limits.max_entries) abort();
  const auto layout = hotspot_layout(*vm);
  const auto* l = std::get_if<HotSpotLayout>(&layout);
  if (!l) return 0;
  check_code_cache(memory, *l);
  RemoteReader names(memory, 1 << 16, 256);
  const auto name = read_method_name(names, *l, names.word(fake::kImageAt).value_or(0));
  if (const auto* n = std::get_if<JavaMethodName>(&name)) {
    if (n->klass.size() > 4096 || n->method.size() > 4096 || n->signature.size() > 4096) abort();
  } else if (std::get<MethodNameError>(name).reason.empty()) {
    abort();
  }
  name_frame(memory, *l, names);
  return 0;
}
