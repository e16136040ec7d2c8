// Perl (threaded perl 5.36) as a runtime (runtimes/runtime.h): its interpreters found by
// runtimes/perl/processes.h, the context stacks read by runtimes/perl/frames.bpf.h, named by
// runtimes/perl/names.h and merged in place of the native Perl_runops_standard frames.
#pragma once

#include <memory>

#include "runtimes/runtime.h"

namespace bpfprof {

std::unique_ptr<Runtime> make_perl_runtime();

}  // namespace bpfprof
