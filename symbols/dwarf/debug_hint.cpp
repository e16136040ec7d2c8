#include "symbols/dwarf/debug_hint.h"

#include "symbols/util/run_program.h"

namespace bpfprof {
namespace {

// The standard output of `dpkg-query -S path`, or empty.
std::string dpkg_query_search(const std::string& path) {
  return program_output({"dpkg-query", "-S", path}, std::chrono::seconds(10)).value_or("");
}

}  // namespace

std::string debian_package_of(const std::string& path) {
  std::string output = dpkg_query_search(path);
  if (output.empty() && path.starts_with("/usr/")) output = dpkg_query_search(path.substr(4));
  // "liblzma5:amd64: /lib/x86_64-linux-gnu/liblzma.so.5.4.1"
  const size_t end = output.find_first_of(":,\n");
  return end == std::string::npos ? std::string() : output.substr(0, end);
}

std::string debug_info_hint(const std::vector<std::string>& library_paths) {
  if (library_paths.empty()) return {};
  std::string packages;
  for (const std::string& path : library_paths) {
    const std::string package = debian_package_of(path);
    if (package.empty() || packages.find(package + "-dbgsym") != std::string::npos) continue;
    packages += (packages.empty() ? "" : " ") + package + "-dbgsym";
  }
  const std::string debuginfod = "set DEBUGINFOD_URLS (e.g. https://debuginfod.debian.net)";
  if (packages.empty()) return "for names there, " + debuginfod;
  return "for names there, install " + packages + " (Debian's debian-debug archive) or " +
         debuginfod;
}

}  // namespace bpfprof
