// HotSpot (Java) as a runtime (runtimes/runtime.h): a recorded process that maps libjvm is a
// JVM; once its tables can be read (runtimes/hotspot/vm_structs.h, layout.h) and its code
// cache is set up (code_cache.h), the kernel walk steps through its Java frames
// (walk.bpf.h) and sends what names them (frames.bpf.h); each Java frame of a stack is
// named here (names.h) in place of its raw code-cache address.
#pragma once

#include <memory>

#include "runtimes/runtime.h"

namespace bpfprof {

std::unique_ptr<Runtime> make_hotspot_runtime();

}  // namespace bpfprof
