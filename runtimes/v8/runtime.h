// V8 (Node.js) as a runtime (runtimes/runtime.h): its processes found by
// runtimes/v8/processes.h, its frames' function slots sent by runtimes/v8/frames.bpf.h and
// named by runtimes/v8/stacks.h.
#pragma once

#include <memory>

#include "runtimes/runtime.h"

namespace bpfprof {

std::unique_ptr<Runtime> make_v8_runtime();

}  // namespace bpfprof
