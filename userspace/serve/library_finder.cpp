#include "userspace/serve/library_finder.h"

#include <fcntl.h>

#include <algorithm>

#include "symbols/elf/elf_file.h"
#include "symbols/util/debug_dirs.h"
#include "symbols/util/held_file.h"
#include "symbols/util/mapping_kind.h"
#include "symbols/util/text.h"
#include "symbols/util/unique_handle.h"
#include "symbols/util/untrusted_file.h"

namespace bpfprof {

namespace {

constexpr char kKernelName[] = "[kernel.kallsyms]";

bool same_hex(std::string_view a, std::string_view b) { return lowercase(a) == lowercase(b); }

bool is_kernel_module(const LibraryDescription& library) {
  return library.path.size() > 2 && library.path.front() == '[' && library.path.back() == ']' &&
         library.path != kKernelName &&
         classify_mapping(library.path) == MappingKind::kOtherSpecial;
}

// Adds `candidate` to `files` when it has the build-id `code_id` and is not there yet.
void add_if_it_has_build_id(const std::string& candidate, const std::string& code_id,
                            std::vector<std::string>& files) {
  if (!candidate.empty() && std::find(files.begin(), files.end(), candidate) == files.end() &&
      file_has_build_id(candidate, code_id))
    files.push_back(candidate);
}

}  // namespace

bool file_has_build_id(const std::string& path, const std::string& code_id) {
  const UniqueFd fd =
      open_untrusted(path, UntrustedKind::kBinary, std::nullopt, Copying::kNever).fd;
  if (!fd.valid() || code_id.empty()) return false;
  return same_hex(hex_string(read_elf_build_id(fd.get())), code_id);
}

LibraryFinder::LibraryFinder(std::vector<LibraryDescription> libraries,
                             std::vector<std::string> symbol_dirs)
    : libraries_(std::move(libraries)),
      symbol_dirs_(std::move(symbol_dirs)),
      debuginfod_(Debuginfod::from_environment()) {}

LibraryFinder::~LibraryFinder() = default;

std::optional<FoundLibrary> LibraryFinder::by_debug_id(const std::string& debug_name,
                                                       const std::string& breakpad_id) {
  for (const LibraryDescription& library : libraries_) {
    if (library.debug_name == debug_name && same_hex(library.breakpad_id, breakpad_id))
      return find(library);
  }
  return std::nullopt;
}

std::optional<FoundLibrary> LibraryFinder::by_code_id(const std::string& name,
                                                      const std::string& code_id) {
  for (const LibraryDescription& library : libraries_) {
    if (library.name == name && same_hex(library.code_id, code_id)) return find(library);
  }
  return std::nullopt;
}

std::optional<FoundLibrary> LibraryFinder::find(const LibraryDescription& library) {
  auto [it, inserted] = found_.try_emplace(&library);
  if (!inserted) return it->second;
  FoundLibrary found;
  found.description = &library;
  if (library.path == kKernelName) {
    // The running kernel only: another one's addresses would name the wrong functions.
    if (!same_hex(library.breakpad_id, breakpad_id_from_build_id(kernel_build_id()))) return {};
    found.kind = LibraryKind::kKernel;
  } else if (library.path == "[bpf]") {
    // BPF programs come and go: today's at an offset are not the recording's.
    return {};
  } else if (is_kernel_module(library)) {
    found.kind = LibraryKind::kKernelModule;
    found.kernel_module = library.path.substr(1, library.path.size() - 2);
  } else {
    found.files = files_with_build_id(library);
    if (found.files.empty()) return {};
  }
  it->second = std::move(found);
  return it->second;
}

std::vector<std::string> LibraryFinder::files_with_build_id(
    const LibraryDescription& library) const {
  const std::string& id = library.code_id;
  if (id.size() < 4) return {};
  const bool vdso = classify_mapping(library.path) == MappingKind::kVdso;
  // The copies with code bytes, then the debug files.
  std::vector<std::string> code{vdso ? vdso_image_path() : library.path};
  for (std::string& path : build_id_paths(id, symbol_dirs_, BuildIdFile::kBinary))
    code.push_back(std::move(path));
  std::vector<std::string> debug{vdso ? std::string() : library.debug_path};
  for (std::string& path : build_id_paths(id, symbol_dirs_, BuildIdFile::kDebug))
    debug.push_back(std::move(path));
  std::vector<std::string> files;
  for (const std::string& candidate : code) add_if_it_has_build_id(candidate, id, files);
  const bool has_code = !files.empty();
  for (const std::string& candidate : debug) add_if_it_has_build_id(candidate, id, files);
  if (!has_code && !vdso) add_from_debuginfod(id, files);
  return files;
}

// The library's own bytes (the disassembly's) and its debug file, where no local copy of
// the library was found. The one fetched comes first: the code before the debug files.
void LibraryFinder::add_from_debuginfod(const std::string& code_id,
                                        std::vector<std::string>& files) const {
  if (!debuginfod_) return;
  std::optional<std::string> executable = debuginfod_->executable(code_id);
  if (!executable || !file_has_build_id(*executable, code_id)) return;
  files.insert(files.begin(), *executable);
  if (std::optional<std::string> debug = debuginfod_->debuginfo(code_id))
    add_if_it_has_build_id(*debug, code_id, files);
}

}  // namespace bpfprof
