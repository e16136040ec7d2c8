// Human-readable function names: C++ (Itanium ABI, `_Z...`) and Rust (legacy `_ZN...17h<hash>E`
// and v0 `_R...`) symbols demangled by libiberty, without parameter lists, the way profilers
// show them (`ns::Class<int>::method`, `core::fmt::write`).
#pragma once

#include <string>
#include <string_view>

namespace bpfprof {

// The demangled form of `symbol`. A symbol-version suffix (`@VER`, `@@VER`, as in
// `clock_gettime@@GLIBC_2.17`) is removed first; a name that is not mangled, or that the
// demangler rejects, comes back otherwise unchanged; a PLT slot's `@plt` stays. Never throws on
// malformed input.
std::string demangle(std::string_view symbol);

// `symbol` without a trailing symbol-version suffix (`foo@GLIBC_2.2.5` -> `foo`).
std::string_view strip_symbol_version(std::string_view symbol);

}  // namespace bpfprof
