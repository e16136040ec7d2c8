// What the in-kernel walk needs of one running JVM (bpfprof_hotspot_process, bpf/events.h):
// its code cache's heaps and their segment maps, the interpreter's code, and the offsets of
// the blob and frame fields the walk reads, from HotSpot's own tables (layout.h) and the
// JVM's memory. A JVM that is still starting has none of it yet: that is said apart from a
// JVM whose memory makes no sense, so that the caller tries the first again later.
#pragma once

#include <string>
#include <variant>

#include "runtimes/hotspot/events.h"
#include "runtimes/hotspot/layout.h"
#include "runtimes/kit/remote_memory.h"

namespace bpfprof::hotspot {

struct CodeCacheError {
  std::string reason;      // one line
  bool not_ready = false;  // the JVM has not set up its code cache or interpreter yet
};

// x86-64's interpreter frame slots (frame_x86.hpp), in words from rbp, for JVMs that do not
// export them (JDK 17 exports only the sender's sp).
inline constexpr int32_t kX86InterpreterSenderSp = -1;
inline constexpr int32_t kX86InterpreterMethod = -3;
inline constexpr int32_t kX86InterpreterBcp = -8;

// Reads the code cache's bounds, its heaps (at most BPFPROF_HOTSPOT_CODE_HEAPS, each inside
// the bounds, one segment size) and the interpreter's code (inside the bounds) through
// `reader`, and checks that every blob offset lies in the walk's window.
std::variant<bpfprof_hotspot_process, CodeCacheError> read_code_cache(RemoteReader& reader,
                                                                      const HotSpotLayout& layout);

}  // namespace bpfprof::hotspot
