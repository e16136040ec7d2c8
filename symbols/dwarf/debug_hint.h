// What to install so that code without symbols gets names: on Debian the package's
// `-dbgsym` companion (from the debian-debug archive), anywhere a debuginfod server.
#pragma once

#include <string>
#include <vector>

namespace bpfprof {

// The Debian package that owns `path` ("liblzma5"), asked of dpkg-query; empty when none
// does or dpkg is not there. /usr/lib and /lib name the same file on merged-/usr systems,
// but dpkg knows only the path the package shipped.
std::string debian_package_of(const std::string& path);

// One line naming the fix for these libraries' code without symbols, e.g. "install
// liblzma5-dbgsym (deb http://deb.debian.org/debian-debug ...) or set DEBUGINFOD_URLS";
// empty for no libraries.
std::string debug_info_hint(const std::vector<std::string>& library_paths);

}  // namespace bpfprof
