// Where debug files are looked for, in one place for every reader: /usr/lib/debug, then each
// --symbol-dir, by build-id (ROOT/.build-id/xx/rest.debug) and, for libdwfl, by debuglink.
#pragma once

#include <cstdint>
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

// A build-id tree keeps a file's debug file (ROOT/.build-id/xx/rest.debug) and may keep the
// binary itself (ROOT/.build-id/xx/rest).
enum class BuildIdFile : uint8_t { kDebug, kBinary };

// Where the roots' build-id trees keep that file of the build-id `hex`, in search order.
inline std::vector<std::string> build_id_paths(const std::string& hex,
                                               const std::vector<std::string>& symbol_dirs,
                                               BuildIdFile file = BuildIdFile::kDebug) {
  std::vector<std::string> paths;
  if (hex.size() < 4) return paths;
  const std::string in_tree = "/.build-id/" + hex.substr(0, 2) + "/" + hex.substr(2) +
                              (file == BuildIdFile::kDebug ? ".debug" : "");
  for (const std::string& root : debug_roots(symbol_dirs)) paths.push_back(root + in_tree);
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
