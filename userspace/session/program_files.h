// The ELF files a command maps as it starts, known before it runs (`record -- CMD`): its
// executable (a script's interpreter), the dynamic loader, and the libraries the loader
// resolves for it. Their unwind tables are loaded before the command runs, so that its first
// samples are walked in the kernel rather than falling back to stack copies.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace bpfprof {

// The files, absolute paths, the executable first; only the executable (or the script's
// interpreter) and its loader when the loader is not the system's own (which alone is run,
// with --list, to resolve the libraries: `ldd` without running the program's code).
std::vector<std::string> files_mapped_at_start(const std::string& executable);

// The library paths of the dynamic loader's --list output ("\tlibc.so.6 => /lib/... (0x...)",
// "\t/lib64/ld-linux-x86-64.so.2 (0x...)"), in order; names not found are left out.
std::vector<std::string> parse_loader_list(std::string_view output);

}  // namespace bpfprof
