// `bpfprof serve FILE` (and `record --open`): serves one profile over HTTP on 127.0.0.1 so
// that https://profiler.firefox.com/from-url/... can load it, prints that link and opens a
// browser when there is one. Only that file is served, at /<its name>.
#pragma once

#include <cstdint>
#include <string>

namespace bpfprof {

struct ServeOptions {
  std::string path;
  uint16_t port = 0;         // 0: any free port
  bool open_browser = true;  // with xdg-open, when a display is set
};

// Serves until SIGINT/SIGTERM; returns 0 then, or 2 with a one-line message when the file
// cannot be read or the port not bound.
int run_serve(const ServeOptions& options);

// The from-url link of the Firefox Profiler for a profile served at `url`.
std::string profiler_link(const std::string& url);
// Percent-encoding of everything but unreserved characters (RFC 3986).
std::string url_encode(const std::string& text);

}  // namespace bpfprof
