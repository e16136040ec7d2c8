// CPython (3.11-3.13) as a runtime (runtimes/runtime.h): its interpreters found by
// runtimes/python/processes.h, their frames read by runtimes/python/frames.bpf.h and merged
// by runtimes/python/stacks.h.
#pragma once

#include <memory>

#include "runtimes/runtime.h"

namespace bpfprof {

std::unique_ptr<Runtime> make_python_runtime();

}  // namespace bpfprof
