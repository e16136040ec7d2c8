// PHP (the Zend engine, NTS builds) as a runtime (runtimes/runtime.h): its interpreters found
// by runtimes/php/processes.h, the execute_data chain read by runtimes/php/frames.bpf.h,
// named by runtimes/php/names.h and merged in place of the native execute_ex frames.
#pragma once

#include <memory>

#include "runtimes/runtime.h"

namespace bpfprof {

std::unique_ptr<Runtime> make_php_runtime();

}  // namespace bpfprof
