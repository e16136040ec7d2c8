// V8's embedded builtins (Node.js, Chromium): the code of V8's builtins (the JS entry
// trampolines, the interpreter's bytecode handlers, Array.prototype.sort, JSON, ...) is one
// blob in the binary that no CFI describes. V8 keeps a frame-pointer frame for every builtin
// that calls (rbp: the caller's rbp at [rbp], the return address at [rbp + 8]), and rbp is
// never a general register in V8's code, so a builtin's caller is found through rbp at any
// pc; the unwind table gives the blob that rule (no_cfi_spans.h).
#pragma once

#include <gelf.h>

#include <cstdint>
#include <optional>

namespace bpfprof {

class ElfFile;

// The embedded blob's code in the file's virtual addresses.
struct V8EmbeddedCode {
  uint64_t start = 0;
  uint64_t end = 0;
};

// The code of V8's embedded blob in `elf`, from the symbols mksnapshot writes for it
// (v8_Default_embedded_blob_code_ and the 32-bit v8_Default_embedded_blob_code_size_), in
// .symtab or .dynsym; cut at the end of the executable section that holds its start. nullopt
// for a file that is not V8 (or has neither symbol: a stripped one).
std::optional<V8EmbeddedCode> find_v8_embedded_code(Elf* elf);

// Whether the file holds V8 (node, a libnode, Chromium): a symbol of its builtins
// (Builtins_*) or its internals (v8::internal::, which node exports in .dynsym even when
// stripped). Its process's JIT code keeps frame-pointer frames too. `fd`: the file, open.
bool is_v8_binary(int fd);

}  // namespace bpfprof
