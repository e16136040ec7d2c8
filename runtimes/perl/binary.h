// Recognises a perl (the executable, or a libperl.so a program embeds) and finds, in its own
// addresses, what reads its interpreters: the release (PL_revision, PL_version,
// PL_subversion) and the interpreter's size (PL_interp_size, a fingerprint of the build's
// layout), where each thread's interpreter is (PL_current_context, a thread-local: an
// executable's initial-exec TLS block lies just below the thread pointer), the main
// interpreter (PL_curinterp) and the op loop whose native frames Perl frames replace
// (Perl_runops_standard). docs/research/perl-interpreter.md has the facts.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include "runtimes/perl/layout.h"
#include "symbols/elf/elf_file.h"

namespace bpfprof {

// Whether a mapped file's base name is a perl's: perl, perl5.36.0, libperl.so.5.36(.0).
bool is_perl_file_name(std::string_view base);

const PerlLayout* perl_layout(const PerlVersion& version, uint16_t interp_size);

// The offset from the thread pointer of an executable's thread-local at `value` in its TLS
// block of `size` bytes aligned to `align` (x86-64, the executable's block first below the
// thread pointer); nullopt for a block that does not fit the rule.
std::optional<int64_t> executable_tls_offset(uint64_t value, uint64_t size, uint64_t align);

struct PerlBinary {
  std::shared_ptr<const ElfFile> elf;  // places a mapping of it
  const PerlLayout* layout = nullptr;
  PerlVersion version;
  // my_perl of the current thread = *(thread pointer + tls_offset); only for an executable
  // (a library's thread-locals need the DTV).
  std::optional<int64_t> tls_offset;
  uint64_t curinterp = 0;     // PL_curinterp
  uint64_t runops_start = 0;  // [start, end): Perl_runops_standard
  uint64_t runops_end = 0;
};
struct PerlRejection {
  std::string reason;
};
std::variant<PerlBinary, PerlRejection> inspect_perl_binary(const std::string& readable_path);

}  // namespace bpfprof
