// Finds the files of a profile's libraries again, by build-id, the way the recorder found
// them: the library's own path, then its debug file by build-id under /usr/lib/debug and each
// --symbol-dir (DIR/.build-id/xx/rest.debug), then the debuginfod servers of
// $DEBUGINFOD_URLS where none of those has the library itself. A file counts only when its build-id
// is the one the profile recorded; the kernel and its modules are named from /proc/kallsyms (BPF
// programs, which another run replaces, are not served).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "symbols/symbolizer.h"
#include "userspace/serve/debuginfod.h"

namespace bpfprof {

enum class LibraryKind : uint8_t { kFile, kKernel, kKernelModule };

struct FoundLibrary {
  const LibraryDescription* description = nullptr;
  LibraryKind kind = LibraryKind::kFile;
  // kFile: readable copies with the recorded build-id, the library itself before its debug
  // files (which have no code bytes); never empty.
  std::vector<std::string> files;
  std::string kernel_module;  // kKernelModule: the module's name, without brackets
};

class LibraryFinder {
 public:
  LibraryFinder(std::vector<LibraryDescription> libraries, std::vector<std::string> symbol_dirs);
  ~LibraryFinder();

  // A library as /symbolicate/v5 and /source/v1 name it: debugName and breakpadId.
  std::optional<FoundLibrary> by_debug_id(const std::string& debug_name,
                                          const std::string& breakpad_id);
  // A library as /asm/v1 names it: name and codeId (the GNU build-id, hex).
  std::optional<FoundLibrary> by_code_id(const std::string& name, const std::string& code_id);

  const std::vector<LibraryDescription>& libraries() const { return libraries_; }

 private:
  std::optional<FoundLibrary> find(const LibraryDescription& library);
  std::vector<std::string> files_with_build_id(const LibraryDescription& library) const;
  void add_from_debuginfod(const std::string& code_id, std::vector<std::string>& files) const;

  std::vector<LibraryDescription> libraries_;
  std::vector<std::string> symbol_dirs_;
  std::map<const LibraryDescription*, std::optional<FoundLibrary>> found_;
  std::unique_ptr<Debuginfod> debuginfod_;  // null without $DEBUGINFOD_URLS
};

// Whether the ELF file at `path` has the GNU build-id `code_id` (hex).
bool file_has_build_id(const std::string& path, const std::string& code_id);

}  // namespace bpfprof
