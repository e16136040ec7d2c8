// `bpfprof serve FILE` (and `record --open`): serves one profile over HTTP on 127.0.0.1 so
// that https://profiler.firefox.com/from-url/... can load it, prints that link and opens a
// browser when there is one. Under an unguessable path prefix it serves that file and the
// symbol server of the Firefox Profiler (userspace/serve/symbol_api.h: /symbolicate/v5,
// /source/v1, /asm/v1) for the libraries the profile names; nothing else.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace bpfprof {

struct ServeOptions {
  std::string path;
  uint16_t port = 0;                     // 0: any free port
  bool open_browser = true;              // with $BROWSER, else xdg-open when a display is set
  std::vector<std::string> symbol_dirs;  // --symbol-dir: more places for debug files
};

// Serves until SIGINT/SIGTERM; returns 0 then, or 2 with a one-line message when the file
// cannot be read or the port not bound.
int run_serve(const ServeOptions& options);

// The from-url link of the Firefox Profiler for a profile served at `url`, with the symbol
// server at `symbol_server` (none when empty).
std::string profiler_link(const std::string& url, const std::string& symbol_server = "");
// Percent-encoding of everything but unreserved characters (RFC 3986).
std::string url_encode(const std::string& text);

}  // namespace bpfprof
