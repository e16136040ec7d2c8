// libdebuginfod's functions as `serve` calls them, from the library loaded when first used
// (see symbols/util/lazy_library.h): it pulls in libcurl with GnuTLS, which a recording never
// needs. Without the library no client opens, as when DEBUGINFOD_URLS is unset.
#include <elfutils/debuginfod.h>

#include <cerrno>

#include "symbols/util/lazy_library.h"

namespace {

// Debuginfod::from_environment says it when DEBUGINFOD_URLS asks for a client.
constinit bpfprof::LazyLibrary debuginfod_library(BPFPROF_DEBUGINFOD_SONAME, nullptr);

}  // namespace

extern "C" {

debuginfod_client* debuginfod_begin() {
  static auto* f = debuginfod_library.function<decltype(debuginfod_begin)>("debuginfod_begin");
  return f ? f() : nullptr;
}

void debuginfod_end(debuginfod_client* client) {
  static auto* f = debuginfod_library.function<decltype(debuginfod_end)>("debuginfod_end");
  if (f) f(client);
}

int debuginfod_find_executable(debuginfod_client* client, const unsigned char* build_id,
                               int build_id_len, char** path) {
  static auto* f = debuginfod_library.function<decltype(debuginfod_find_executable)>(
      "debuginfod_find_executable");
  return f ? f(client, build_id, build_id_len, path) : -ENOSYS;
}

int debuginfod_find_debuginfo(debuginfod_client* client, const unsigned char* build_id,
                              int build_id_len, char** path) {
  static auto* f =
      debuginfod_library.function<decltype(debuginfod_find_debuginfo)>("debuginfod_find_debuginfo");
  return f ? f(client, build_id, build_id_len, path) : -ENOSYS;
}

}  // extern "C"
