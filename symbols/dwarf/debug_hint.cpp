#include "symbols/dwarf/debug_hint.h"

#include <map>
#include <sstream>

#include "symbols/util/run_program.h"

namespace bpfprof {
namespace {

// The package of each of `paths` that dpkg-query knows, by path: one run for them all (each
// run reads dpkg's whole database). It exits 1 when one of them is not found, and prints the
// others.
std::map<std::string, std::string> dpkg_packages_of(const std::vector<std::string>& paths) {
  std::map<std::string, std::string> packages;
  if (paths.empty()) return packages;
  std::vector<std::string> argv = {"dpkg-query", "-S"};
  argv.insert(argv.end(), paths.begin(), paths.end());
  std::istringstream lines(
      program_output(argv, std::chrono::seconds(10), ExitStatus::kAny).value_or(""));
  // "liblzma5:amd64: /lib/x86_64-linux-gnu/liblzma.so.5.4.1"; a path several packages share
  // lists them ("a, b: /path"): the first is named. "diversion by ..." lines name no owner.
  for (std::string line; std::getline(lines, line);) {
    if (line.starts_with("diversion by ")) continue;
    const size_t separator = line.find(": ");
    const size_t end = line.find_first_of(":,");
    if (separator == std::string::npos || end == 0) continue;
    packages.emplace(line.substr(separator + 2), line.substr(0, end));
  }
  return packages;
}

// The packages of `paths` (empty where none): /usr/lib and /lib name the same file on
// merged-/usr systems, but dpkg knows only the path the package shipped.
std::vector<std::string> debian_packages_of(const std::vector<std::string>& paths) {
  const std::map<std::string, std::string> found = dpkg_packages_of(paths);
  std::vector<std::string> without_usr;
  for (const std::string& path : paths)
    if (!found.contains(path) && path.starts_with("/usr/")) without_usr.push_back(path.substr(4));
  const std::map<std::string, std::string> merged = dpkg_packages_of(without_usr);
  std::vector<std::string> packages;
  for (const std::string& path : paths) {
    auto it = found.find(path);
    if (it != found.end()) {
      packages.push_back(it->second);
      continue;
    }
    it = path.starts_with("/usr/") ? merged.find(path.substr(4)) : merged.end();
    packages.push_back(it != merged.end() ? it->second : std::string());
  }
  return packages;
}

}  // namespace

std::string debian_package_of(const std::string& path) { return debian_packages_of({path})[0]; }

std::string debug_info_hint(const std::vector<std::string>& library_paths) {
  if (library_paths.empty()) return {};
  std::string packages;
  for (const std::string& package : debian_packages_of(library_paths)) {
    if (package.empty() || packages.find(package + "-dbgsym") != std::string::npos) continue;
    packages += (packages.empty() ? "" : " ") + package + "-dbgsym";
  }
  const std::string debuginfod = "set DEBUGINFOD_URLS (e.g. https://debuginfod.debian.net)";
  if (packages.empty()) return "for names there, " + debuginfod;
  return "for names there, install " + packages + " (Debian's debian-debug archive) or " +
         debuginfod;
}

}  // namespace bpfprof
