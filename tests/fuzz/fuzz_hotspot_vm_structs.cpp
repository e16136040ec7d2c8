// libFuzzer target for HotSpot's tables as bpfprof reads them from a JVM's memory
// (runtimes/hotspot): all of it is the profiled process's to write. The first byte picks the
// limits (bit 0: tight ones); the rest is a pretend process image as
// tests/unit/hotspot_fake_image.h lays it out: the 21 words libjvm's table symbols hold, then
// the memory they point into, whose first word is a Method* to name. The tables must parse
// or give an error, within the limits; a layout taken from them must name the Method or say
// why not; never a crash, a hang or a read outside the image.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <variant>

#include "runtimes/hotspot/layout.h"
#include "runtimes/hotspot/remote_memory.h"
#include "runtimes/hotspot/vm_structs.h"
#include "tests/unit/hotspot_fake_image.h"

using namespace bpfprof::hotspot;

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
  RemoteReader names(memory, 1 << 16, 256);
  const auto name = read_method_name(names, *l, names.word(fake::kImageAt).value_or(0));
  if (const auto* n = std::get_if<JavaMethodName>(&name)) {
    if (n->klass.size() > 4096 || n->method.size() > 4096 || n->signature.size() > 4096) abort();
  } else if (std::get<MethodNameError>(name).reason.empty()) {
    abort();
  }
  return 0;
}
