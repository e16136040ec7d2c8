// Lines and inlined methods of Java frames, from what HotSpot keeps for its own stack
// traces: a method's line number table (compressed, after its bytecodes in its ConstMethod),
// and a compiled method's debug info (its pc descriptors, each pointing at a chain of scopes:
// the method and bytecode index at that pc, then the methods it was inlined into, out to the
// nmethod's own). All of it is the profiled process's memory: every read is bounded by a
// RemoteReader's budget, every count and offset checked against the region it lies in.
// The encodings are JDK 17's (CompressedStream's UNSIGNED5 integers).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "runtimes/hotspot/layout.h"
#include "runtimes/kit/remote_memory.h"

namespace bpfprof::hotspot {

// A method's lines by bytecode index, as its class file's LineNumberTable gave them.
class LineTable {
 public:
  // The most entries kept (a method has at most 64 KiB of bytecodes).
  static constexpr size_t kMaxEntries = 1 << 16;

  // The table's bytes (a 0 byte ends it); nullopt when they are not a table.
  static std::optional<LineTable> decode(std::span<const uint8_t> bytes);
  // The line of `bci` as Method::line_number_from_bci finds it: an entry of that index, else
  // the closest one before it; 0 when none.
  uint32_t line_at(int32_t bci) const;
  size_t size() const { return entries_.size(); }

 private:
  std::vector<std::pair<int32_t, int32_t>> entries_;  // (bci, line), in the table's order
};

// A method's bytecodes and lines, read from its ConstMethod.
struct MethodCode {
  uint64_t code_begin = 0;  // the first bytecode: an interpreter frame's bcp lies after it
  uint16_t code_size = 0;
  std::optional<LineTable> lines;  // none when the class has no line numbers
  // The bytecode index of an interpreter frame's bcp, or -1 when outside the bytecodes.
  int32_t bci_of(uint64_t bcp) const {
    return bcp >= code_begin && bcp < code_begin + code_size
               ? static_cast<int32_t>(bcp - code_begin)
               : -1;
  }
};

struct DebugInfoError {
  std::string reason;  // one line
};

// The bytes read for one method's code and lines, or one compiled frame's scopes.
inline constexpr uint64_t kDebugInfoReadBudget = 256 << 10;

// The code of the Method at `method` (its layout's debug_info must be set).
std::variant<MethodCode, DebugInfoError> read_method_code(RemoteReader& reader,
                                                          const HotSpotLayout& layout,
                                                          uint64_t method);

// One method of a compiled frame: its Method* and bytecode index (-1: not known).
struct JavaScope {
  uint64_t method = 0;
  int32_t bci = -1;
};

// The most scopes (the method at the pc and those it was inlined into) taken for one pc.
inline constexpr size_t kMaxScopes = 64;

// Which PcDesc describes a pc: a caller's return address has one of its own (the call
// site's) or none (a call into a stub, which records no debug info); a leaf's pc, anywhere in
// the code, takes the next one after it, as HotSpot's own approximate lookup does.
enum class PcKind : uint8_t { kReturnAddress, kLeaf };

// The scopes of the compiled frame at `pc` of the nmethod at `nmethod`, innermost first;
// the last is the nmethod's own method, which must be `method` (what the kernel walk read
// from the blob at the sample: a blob freed or reused since gives an error).
std::variant<std::vector<JavaScope>, DebugInfoError> read_compiled_scopes(
    RemoteReader& reader, const HotSpotLayout& layout, uint64_t nmethod, uint64_t method,
    uint64_t pc, PcKind kind);

}  // namespace bpfprof::hotspot
