// Erlang functions as the emulator and Elixir write them: `lists:reverse/2`,
// `erl_init:'-start/2-fun-0-'/0` (atoms quoted where the emulator quotes them), and for modules
// Elixir compiled (`Elixir.` atoms) `Foo.Bar.baz/2` and `anonymous fn/1 in Foo.Bar.baz/2`.
#pragma once

#include <string>
#include <string_view>

#include "runtimes/beam/code_index.h"

namespace bpfprof {

// `atom` as the emulator prints it (its perf map, crash dumps): quoted unless it is a
// lowercase-led name of letters, digits, _ and @. Reserved words stay bare there
// (`prim_eval:receive/2`), as they do here.
std::string erlang_atom(std::string_view atom);
// The function's name in its module's language.
std::string beam_function_name(const BeamMfa& mfa);

}  // namespace bpfprof
