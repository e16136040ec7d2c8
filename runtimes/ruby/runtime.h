// CRuby (3.1) as a runtime (runtimes/runtime.h): its interpreters found by
// runtimes/ruby/processes.h, their control frames read by runtimes/ruby/frames.bpf.h, named by
// runtimes/ruby/iseqs.h and merged in place of the native rb_vm_exec frames.
#pragma once

#include <memory>

#include "runtimes/runtime.h"

namespace bpfprof {

std::unique_ptr<Runtime> make_ruby_runtime();

}  // namespace bpfprof
