// Java threads' names from a live JVM (the kernel keeps 15 characters of a thread's name:
// "ForkJoinPool.commonPool-worker-1" is "ForkJoinPool.co"): each JavaThread of the JVM's thread
// list, its kernel tid (OSThread) and its java.lang.Thread's `name` String, the field found
// through the class's own field table and the String's bytes read as LATIN1 or UTF-16. All of it
// is the profiled process's memory: every read is bounded and checked (a class named as
// expected, lengths, the number of threads and fields), and what does not check out is left out.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtimes/hotspot/layout.h"
#include "runtimes/kit/remote_memory.h"

namespace bpfprof::hotspot {

struct JavaThreadName {
  int32_t tid = 0;
  std::string name;  // UTF-8
};

// `read`, as a thread's name for its track: the launcher's main thread is renamed DestroyJavaVM
// when main() returns (to wait for the VM's end), and keeps the name it ran main() under.
void keep_java_thread_name(std::string& kept, std::string read);

class JavaThreadNames {
 public:
  // `layout.thread_names` must be set.
  explicit JavaThreadNames(const HotSpotLayout& layout) : l_(layout), n_(*layout.thread_names) {}

  // The JVM's threads and their names now.
  std::vector<JavaThreadName> read(RemoteReader& reader);

  static constexpr uint32_t kMaxThreads = 4096;
  static constexpr uint32_t kMaxFields = 512;  // a class's own fields searched
  static constexpr int kMaxSuperclasses = 8;
  static constexpr int32_t kMaxNameUnits = 256;

 private:
  struct Compression {
    bool oops = false;
    bool klass_pointers = false;
    uint64_t oop_base = 0;
    int32_t oop_shift = 0;
    uint64_t klass_base = 0;
    int32_t klass_shift = 0;
  };
  bool read_compression(RemoteReader& reader);
  std::optional<bool> flag(RemoteReader& reader, const std::string& name);
  std::optional<uint64_t> klass_of(RemoteReader& reader, uint64_t oop);
  std::optional<uint64_t> reference(RemoteReader& reader, uint64_t address);
  std::optional<std::string> symbol(RemoteReader& reader, uint64_t symbol_address);
  // The offset of the instance field `name` of type `signature` in class `klass` or a
  // superclass; cached by class.
  std::optional<uint32_t> field_offset(RemoteReader& reader, uint64_t klass,
                                       const std::string& name, const std::string& signature);
  std::optional<uint32_t> own_field_offset(RemoteReader& reader, uint64_t klass,
                                           const std::string& name, const std::string& signature);
  std::optional<std::string> string_value(RemoteReader& reader, uint64_t string_oop);
  // The thread whose JavaThread* is at `slot` of the thread list, if it has a name.
  std::optional<JavaThreadName> thread_name(RemoteReader& reader, uint64_t slot);

  const HotSpotLayout& l_;
  const ThreadNameLayout& n_;
  std::optional<Compression> compression_;
  std::unordered_map<std::string, std::optional<uint32_t>> offsets_;  // "klass name sig"
};

// UTF-8 of `units` LATIN1 bytes (`utf16`: false) or UTF-16 code units (little-endian pairs).
std::string java_string_utf8(const std::vector<uint8_t>& bytes, bool utf16);

}  // namespace bpfprof::hotspot
