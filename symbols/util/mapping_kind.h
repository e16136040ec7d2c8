// What a mapping's path says it maps: the one place that tells files from anonymous code and
// the kernel's special mappings, for the model, the unwinder, the symbolizer and the pinning
// of mapped files.
#pragma once

#include <cstdint>
#include <string_view>

namespace bpfprof {

enum class MappingKind : uint8_t {
  kFile,  // a file with a path ("/usr/lib/libc.so.6", also " (deleted)" ones)
  // No file to read: JIT code ("", "//anon", "[anon:...]", memfd, heap, stack), and shared
  // anonymous memory ("/dev/zero (deleted)": opcache's JIT buffer; "/SYSV..." segments), whose
  // "file" is the memory itself, as large as the mapping.
  kAnonymousCode,
  kVdso,          // "[vdso]": the kernel's image, read from our own mapping of it
  kOtherSpecial,  // "[vvar]", "[vsyscall]", "[uprobes]", ...
};

// `path` as the kernel reports it in MMAP2 records and /proc/PID/maps.
constexpr MappingKind classify_mapping(std::string_view path) {
  if (path.empty() || path.starts_with("//anon") || path.starts_with("[anon") ||
      path.starts_with("/memfd:") || path == "[heap]" || path == "[stack]" ||
      path == "/dev/zero (deleted)" || path.starts_with("/SYSV"))
    return MappingKind::kAnonymousCode;
  if (path == "[vdso]") return MappingKind::kVdso;
  if (path.front() == '/') return MappingKind::kFile;
  return MappingKind::kOtherSpecial;
}

}  // namespace bpfprof
