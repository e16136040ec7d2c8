// libFuzzer target for Java threads' names as bpfprof reads them from a JVM's memory
// (runtimes/hotspot/thread_names.h): all of it is the profiled process's to write. The first
// 24 bytes pick the layout's offsets (each byte times 8) and FieldInfo's slots; the rest is the
// JVM's memory at fake::kImageAt, where the layout's static entries point (the thread list at
// its start, the flags table and the compressed pointers' bases after it). The names must come
// within the bounds (threads, units a name) and the read budget; never a crash, a hang or a
// read outside the image.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "runtimes/hotspot/layout.h"
#include "runtimes/hotspot/thread_names.h"
#include "runtimes/kit/remote_memory.h"
#include "tests/unit/hotspot_fake_image.h"

using namespace bpfprof;
using namespace bpfprof::hotspot;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  constexpr size_t kLayoutBytes = 24;
  if (size < kLayoutBytes) return 0;
  const auto at = [&](size_t i) { return uint32_t{data[i]} * 8; };
  HotSpotLayout l;
  l.java_thread_list = fake::kImageAt;
  l.threads_list_length = at(0);
  l.threads_list_threads = at(1);
  l.thread_osthread = at(2);
  l.osthread_thread_id = at(3);
  l.java_thread_thread_obj = at(4);
  l.klass_name = at(5);
  l.symbol_length = at(6) / 8;
  l.symbol_body = at(7) / 8;
  l.instance_klass_constants = at(8);
  l.constant_pool_size = at(9);
  l.constant_pool_length = at(10);
  ThreadNameLayout n;
  n.flags = fake::kImageAt + 8;
  n.flag_count = fake::kImageAt + 16;
  n.flag_size = at(11) + 8;
  n.flag_name = at(12);
  n.flag_addr = at(13);
  n.narrow_oop_base = fake::kImageAt + 24;
  n.narrow_oop_shift = fake::kImageAt + 32;
  n.narrow_klass_base = fake::kImageAt + 40;
  n.narrow_klass_shift = fake::kImageAt + 48;
  n.oop_klass = at(14);
  n.klass_super = at(15);
  n.instance_klass_fields = at(16);
  n.instance_klass_java_fields = at(17);
  n.array_u2_data = data[18] % 16;
  n.field_slots = 1 + data[19] % 8;
  n.field_name_index = data[20] % n.field_slots;
  n.field_signature_index = data[21] % n.field_slots;
  n.field_low_offset = data[22] % n.field_slots;
  n.field_high_offset = data[23] % n.field_slots;
  n.field_tag_size = data[23] % 3;
  l.thread_names = n;

  BufferMemory memory;
  memory.place(fake::kImageAt, std::string(reinterpret_cast<const char*>(data + kLayoutBytes),
                                           size - kLayoutBytes));
  constexpr uint64_t kBudget = 1 << 16;
  RemoteReader reader(memory, kBudget, 256);
  JavaThreadNames names(l);
  const std::vector<JavaThreadName> threads = names.read(reader);
  if (reader.bytes_read() > kBudget || threads.size() > JavaThreadNames::kMaxThreads) abort();
  for (const JavaThreadName& thread : threads)
    if (thread.name.empty() || thread.name.size() > 4 * JavaThreadNames::kMaxNameUnits ||
        thread.tid <= 0)
      abort();
  return 0;
}
