// Where the code symbols whose names share a prefix lie in an ELF file (V8's embedded builtins,
// `Builtins_*`, are one block of node's text): read from .symtab and .strtab in chunks, so
// that a binary's 10 MB of symbol names cost no more memory than a chunk, without a symbol
// table built.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace bpfprof {

struct SymbolSpan {
  uint64_t start = 0;  // the file's own virtual addresses
  uint64_t end = 0;
};

// The span from the lowest start to the highest end of the defined function symbols of
// .symtab named `prefix...` in the 64-bit ELF file open as `fd`; nullopt when there are none
// or the file is no such ELF file.
std::optional<SymbolSpan> function_symbols_span(int fd, std::string_view prefix);

}  // namespace bpfprof
