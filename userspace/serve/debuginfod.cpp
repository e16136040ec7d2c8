#include "userspace/serve/debuginfod.h"

#include <elfutils/debuginfod.h>

#include <cstdio>
#include <cstdlib>

namespace bpfprof {

namespace {

using Find = int (*)(debuginfod_client*, const unsigned char*, int, char**);

// A build-id given as hex (length 0 tells libdebuginfod so).
std::optional<std::string> find(debuginfod_client* client, Find what, const std::string& hex) {
  char* path = nullptr;
  const UniqueFd fd(what(client, reinterpret_cast<const unsigned char*>(hex.c_str()), 0, &path));
  if (!fd.valid()) return std::nullopt;
  std::optional<std::string> found;
  if (path) found = path;
  free(path);
  return found;
}

}  // namespace

std::unique_ptr<Debuginfod> Debuginfod::from_environment() {
  const char* urls = getenv("DEBUGINFOD_URLS");
  if (!urls || !*urls) return nullptr;
  Client client(debuginfod_begin());
  if (!client) {
    fprintf(stderr, "bpfprof: DEBUGINFOD_URLS is set, but no debuginfod client could start\n");
    return nullptr;
  }
  return std::unique_ptr<Debuginfod>(new Debuginfod(std::move(client)));
}

void Debuginfod::ClientCloser::operator()(debuginfod_client* client) const noexcept {
  debuginfod_end(client);
}

std::optional<std::string> Debuginfod::executable(const std::string& build_id_hex) {
  return find(client_.get(), debuginfod_find_executable, build_id_hex);
}

std::optional<std::string> Debuginfod::debuginfo(const std::string& build_id_hex) {
  return find(client_.get(), debuginfod_find_debuginfo, build_id_hex);
}

}  // namespace bpfprof
