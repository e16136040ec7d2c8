// Names of the Java frames the kernel walk noted (bpfprof_hotspot_frame): an interpreted or
// compiled method by its Method* (package.Class.method, read_method_name), a stub by its
// blob's name. Read from the live JVM once per Method* or name pointer and kept: a Method*
// lives as long as its class, and a compiled frame's Method* is read from its nmethod at the
// sample, so recompiled or freed code does not change a name. Lines come from the method's
// line table (an interpreted frame's bytecode pointer) or the nmethod's debug info at the
// pc, which also gives the methods inlined there (debug_info.h); an nmethod freed or reused
// before it is read keeps its method's name without a line. Every read is bounded.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtimes/hotspot/debug_info.h"
#include "runtimes/hotspot/events.h"
#include "runtimes/hotspot/layout.h"
#include "runtimes/kit/remote_memory.h"

namespace bpfprof::hotspot {

struct JavaFrameName {
  std::string name;     // "java.util.TreeMap.put", "StubRoutines (1)"
  bool method = false;  // a Java method's (else a stub's, or a placeholder)
  uint32_t line = 0;    // 0: not known
};

class JavaFrameNamer {
 public:
  // The most names kept per JVM; past it the cache starts again.
  static constexpr size_t kMaxCached = 1 << 16;
  // Bytes read to name one Method* (its ConstMethod, pool, tags, holder, Symbols).
  static constexpr uint64_t kMethodReadBudget = 64 << 10;
  // Line table entries kept per JVM (8 bytes each); past it the cache starts again.
  static constexpr size_t kMaxLineEntries = 4 << 20;

  JavaFrameNamer(RemoteMemory& memory, const HotSpotLayout& layout)
      : memory_(memory), layout_(layout) {}

  // The frame at `pc`, innermost first: a compiled frame's inlined methods, then its own;
  // empty when the frame cannot be named (freed, or not what it claims to be).
  std::vector<JavaFrameName> name(const bpfprof_hotspot_frame& frame, uint64_t pc);
  uint64_t methods_read() const { return methods_read_; }

 private:
  std::optional<JavaFrameName> method_name(uint64_t method);
  std::optional<std::string> blob_name(uint64_t name);
  // The method's name at bytecode index `bci` (-1: no line).
  std::optional<JavaFrameName> method_at(uint64_t method, int32_t bci);
  std::vector<JavaFrameName> compiled(const bpfprof_hotspot_frame& frame, uint64_t pc);
  // The method a compiled frame's blob names (the walk read it), as its only frame.
  std::vector<JavaFrameName> walked_method(uint64_t method);
  const std::optional<MethodCode>& method_code(uint64_t method);

  RemoteMemory& memory_;
  const HotSpotLayout& layout_;
  std::unordered_map<uint64_t, std::optional<JavaFrameName>> methods_;
  std::unordered_map<uint64_t, std::optional<std::string>> blob_names_;
  std::unordered_map<uint64_t, std::optional<MethodCode>> codes_;
  size_t code_entries_ = 0;  // line table entries in codes_
  uint64_t methods_read_ = 0;
};

}  // namespace bpfprof::hotspot
