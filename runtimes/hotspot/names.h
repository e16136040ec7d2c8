// Names of the Java frames the kernel walk noted (bpfprof_hotspot_frame): an interpreted or
// compiled method by its Method* (package.Class.method, read_method_name), a stub by its
// blob's name. Read from the live JVM once per Method* or name pointer and kept: a Method*
// lives as long as its class, and a compiled frame's Method* is read from its nmethod at the
// sample, so recompiled or freed code does not change a name. Every read is bounded.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>

#include "bpf/events.h"
#include "runtimes/hotspot/layout.h"
#include "runtimes/hotspot/remote_memory.h"

namespace bpfprof::hotspot {

struct JavaFrameName {
  std::string name;     // "java.util.TreeMap.put", "StubRoutines (1)"
  bool method = false;  // a Java method's (else a stub's, or a placeholder)
};

class JavaFrameNamer {
 public:
  // The most names kept per JVM; past it the cache starts again.
  static constexpr size_t kMaxCached = 1 << 16;
  // Bytes read to name one Method* (its ConstMethod, pool, tags, holder, Symbols).
  static constexpr uint64_t kMethodReadBudget = 64 << 10;

  JavaFrameNamer(RemoteMemory& memory, const HotSpotLayout& layout)
      : memory_(memory), layout_(layout) {}

  // nullopt when the frame cannot be named (freed, or not what it claims to be).
  std::optional<JavaFrameName> name(const bpfprof_hotspot_frame& frame);
  uint64_t methods_read() const { return methods_read_; }

 private:
  std::optional<JavaFrameName> method_name(uint64_t method);
  std::optional<std::string> blob_name(uint64_t name);

  RemoteMemory& memory_;
  const HotSpotLayout& layout_;
  std::unordered_map<uint64_t, std::optional<JavaFrameName>> methods_;
  std::unordered_map<uint64_t, std::optional<std::string>> blob_names_;
  uint64_t methods_read_ = 0;
};

}  // namespace bpfprof::hotspot
