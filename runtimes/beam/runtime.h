// The BEAM (Erlang/OTP's emulator with its x86-64 JIT; Erlang and Elixir) as a runtime
// (runtimes/runtime.h): its emulators found by runtimes/beam/processes.h, their scheduler
// threads walked through JIT code in the kernel (runtimes/beam/walk.bpf.h), the Erlang frames
// named from the emulator's code index (code_index.h, names.h), the running process and a
// NIF's or dirty call's Erlang function placed from runtimes/beam/frames.bpf.h's event.
#pragma once

#include <memory>

#include "runtimes/runtime.h"

namespace bpfprof {

std::unique_ptr<Runtime> make_beam_runtime();

}  // namespace bpfprof
