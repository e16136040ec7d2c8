// Where debug files are looked for, in one place for every reader: /usr/lib/debug, then each
// --symbol-dir, by build-id (ROOT/.build-id/xx/rest.debug) and, for libdwfl, by debuglink.
#pragma once

#include <string>
#include <vector>

namespace bpfprof {

inline constexpr const char* kSystemDebugDir = "/usr/lib/debug";

// The roots searched: the system's debug directory, then the --symbol-dir directories.
inline std::vector<std::string> debug_roots(const std::vector<std::string>& symbol_dirs) {
  std::vector<std::string> roots{kSystemDebugDir};
  roots.insert(roots.end(), symbol_dirs.begin(), symbol_dirs.end());
  return roots;
}

// The debug files of the build-id `hex` in the roots' build-id trees, in search order; with
// `with_binaries`, each root's copy of the binary itself (ROOT/.build-id/xx/rest) first.
inline std::vector<std::string> build_id_paths(const std::string& hex,
                                               const std::vector<std::string>& symbol_dirs,
                                               bool with_binaries = false) {
  std::vector<std::string> paths;
  if (hex.size() < 4) return paths;
  const std::string in_tree = "/.build-id/" + hex.substr(0, 2) + "/" + hex.substr(2);
  for (const std::string& root : debug_roots(symbol_dirs)) {
    if (with_binaries) paths.push_back(root + in_tree);
    paths.push_back(root + in_tree + ".debug");
  }
  return paths;
}

// libdwfl's debuginfo path: next to the file, its .debug/ directory, then the roots (libdwfl
// also looks in each root's build-id tree).
inline std::string dwfl_debuginfo_path(const std::vector<std::string>& symbol_dirs) {
  std::string path = ":.debug";
  for (const std::string& root : debug_roots(symbol_dirs)) path += ":" + root;
  return path;
}

}  // namespace bpfprof
