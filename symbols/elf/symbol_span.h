// Where the code symbols whose names share a prefix lie in an ELF file (V8's embedded builtins,
// `Builtins_*`, are blocks of node's text, its interpreter's among them): read from .symtab and
// .strtab in chunks, so that a binary's 10 MB of symbol names cost no more memory than a
// chunk, without a symbol table built.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string_view>
#include <vector>

namespace bpfprof {

struct SymbolSpan {
  uint64_t start = 0;  // the file's own virtual addresses
  uint64_t end = 0;
};

// The spans (lowest start to highest end) of the defined function symbols of .symtab in the
// 64-bit ELF file open as `fd` whose names begin with `prefix`, by the class that `classify`
// puts each name in (0 to classes - 1; -1: none); a class without any is nullopt. Names of up
// to kMaxClassifiedName bytes are classified (a longer one is in none). Empty when the file
// is no such ELF file.
constexpr size_t kMaxClassifiedName = 256;
std::vector<std::optional<SymbolSpan>> function_symbol_spans(
    int fd, std::string_view prefix, size_t classes,
    const std::function<int(std::string_view name)>& classify);

}  // namespace bpfprof
