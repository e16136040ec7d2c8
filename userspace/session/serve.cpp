#include "userspace/session/serve.h"

#include <httplib.h>
#include <signal.h>
#include <sys/random.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string_view>
#include <thread>

#include "symbols/util/text.h"
#include "userspace/output/profile_libraries.h"
#include "userspace/serve/symbol_api.h"
#include "userspace/session/launcher.h"

namespace bpfprof {

namespace {

volatile sig_atomic_t g_stop = 0;
void on_stop(int) { g_stop = 1; }

// The browser to open a link with: $BROWSER (its first command, as git and Python's
// webbrowser read it) where set, else xdg-open when there is a display; empty for none.
std::string browser_command() {
  if (const char* browser = getenv("BROWSER"); browser && *browser) {
    const std::string_view list(browser);
    return std::string(list.substr(0, list.find(':')));
  }
  if ((getenv("DISPLAY") || getenv("WAYLAND_DISPLAY")) && access("/usr/bin/xdg-open", X_OK) == 0)
    return "/usr/bin/xdg-open";
  return {};
}

// The browser runs as the user who ran sudo, never as root.
void open_in_browser(const std::string& browser, const std::string& link) {
  std::optional<RunAsUser> user;
  try {
    user = sudo_invoking_user();
  } catch (const std::exception& e) {
    fprintf(stderr, "bpfprof: not opening a browser: %s\n", e.what());
    return;
  }
  const pid_t child = fork();
  if (child < 0) {
    fprintf(stderr, "bpfprof: cannot start a browser: %s\n", strerror(errno));
  } else if (child == 0) {
    if (user && become_user(*user) != 0) _exit(127);
    execlp(browser.c_str(), browser.c_str(), link.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
}

// 128 random bits, hex: any web page the browser shows can send requests to 127.0.0.1, but
// none can guess where the profile and the source files are.
std::optional<std::string> unguessable_prefix() {
  uint8_t bytes[16];
  if (getrandom(bytes, sizeof bytes, 0) != static_cast<ssize_t>(sizeof bytes)) return std::nullopt;
  return "/" + hex_string(std::string_view(reinterpret_cast<const char*>(bytes), sizeof bytes));
}

constexpr size_t kMaxRequestBytes = 64 << 20;

struct ServedProfile {
  std::string path;          // the request path of the file (decoded)
  std::string body;          // the file as it is
  const char* content_type;  // gzip or JSON
};

// What the server answers: the profile at its path, the symbol API under `prefix`, 404 else.
void route(httplib::Server& server, const ServedProfile& profile, const std::string& prefix,
           SymbolApi& api) {
  server.set_default_headers({{"Access-Control-Allow-Origin", "*"},
                              {"Access-Control-Allow-Methods", "GET, HEAD, POST, OPTIONS"},
                              {"Access-Control-Allow-Headers", "*"}});
  server.Options(".*", [](const httplib::Request&, httplib::Response& res) { res.status = 204; });
  server.Get(".*", [&profile](const httplib::Request& req, httplib::Response& res) {
    if (req.path != profile.path) {
      res.status = 404;
      res.set_content("not found\n", "text/plain");
      return;
    }
    res.set_content(profile.body, profile.content_type);
  });
  // The body read through a content reader: httplib's own reading caps bodies sent as
  // form data (curl's and urllib's default type) at 8 KiB; the browser sends text/plain.
  server.Post(".*", [&api, prefix](const httplib::Request& req, httplib::Response& res,
                                   const httplib::ContentReader& read) {
    std::string body;
    const bool complete = read([&body](const char* data, size_t length) {
      body.append(data, length);
      return body.size() <= kMaxRequestBytes;
    });
    if (!req.path.starts_with(prefix + "/")) {
      res.status = 404;
      res.set_content("not found\n", "text/plain");
      return;
    }
    if (!complete) {
      res.status = 413;
      res.set_content("{\"error\": \"request too large\"}", "application/json");
      return;
    }
    const ApiResponse answer = api.handle(std::string_view(req.path).substr(prefix.size()), body);
    res.status = answer.status;
    res.set_content(answer.json, "application/json");
  });
}

std::optional<ServedProfile> read_profile(const std::string& path, const std::string& prefix) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    fprintf(stderr, "bpfprof: cannot read %s: %s\n", path.c_str(), strerror(errno));
    return std::nullopt;
  }
  ServedProfile profile;
  profile.body.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  const bool gzipped = profile.body.size() >= 2 &&
                       static_cast<unsigned char>(profile.body[0]) == 0x1f &&
                       static_cast<unsigned char>(profile.body[1]) == 0x8b;
  profile.content_type = gzipped ? "application/gzip" : "application/json";
  profile.path = prefix + "/" + base_name(path);
  return profile;
}

// The libraries the symbol server answers for: the profile's (none, said in one line, when
// the file is not a profile that names any).
std::vector<LibraryDescription> libraries_of(const std::string& path) {
  std::string error;
  std::optional<std::vector<LibraryDescription>> libraries = read_profile_libraries(path, &error);
  if (!libraries) {
    fprintf(stderr, "bpfprof: no symbols served: %s\n", error.c_str());
    return {};
  }
  return std::move(*libraries);
}

// Stops the server on SIGINT/SIGTERM.
void stop_on_signal(httplib::Server& server, std::atomic<bool>& done) {
  while (!g_stop && !done) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  server.stop();
}

}  // namespace

std::string url_encode(const std::string& text) {
  std::string out;
  for (unsigned char c : text) {
    if (isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      char hex[4];
      snprintf(hex, sizeof hex, "%%%02X", c);
      out += hex;
    }
  }
  return out;
}

std::string profiler_link(const std::string& url, const std::string& symbol_server) {
  std::string link = "https://profiler.firefox.com/from-url/" + url_encode(url) + "/";
  if (!symbol_server.empty()) link += "?symbolServer=" + url_encode(symbol_server);
  return link;
}

int run_serve(const ServeOptions& options) {
  const std::optional<std::string> prefix = unguessable_prefix();
  if (!prefix) {
    fprintf(stderr, "bpfprof: no random bytes for the served path: %s\n", strerror(errno));
    return 2;
  }
  const std::optional<ServedProfile> profile = read_profile(options.path, *prefix);
  if (!profile) return 2;
  SymbolApi api(libraries_of(options.path), SymbolizerOptions{options.symbol_dirs});
  httplib::Server server;
  server.set_payload_max_length(kMaxRequestBytes);
  // One request per connection: an idle kept-alive connection would hold a server thread.
  server.set_keep_alive_max_count(1);
  route(server, *profile, *prefix, api);
  // Never reachable from other machines.
  const int port = options.port == 0
                       ? server.bind_to_any_port("127.0.0.1")
                       : (server.bind_to_port("127.0.0.1", options.port) ? options.port : -1);
  if (port <= 0) {
    fprintf(stderr, "bpfprof: cannot listen on 127.0.0.1:%u: %s\n", options.port, strerror(errno));
    return 2;
  }
  const std::string origin = "http://127.0.0.1:" + std::to_string(port);
  const std::string url = origin + *prefix + "/" + url_encode(base_name(options.path));
  const std::string symbol_server = origin + *prefix;
  const std::string link = profiler_link(url, symbol_server);
  printf("bpfprof: serving %s at %s (Ctrl-C to stop)\n%s\n", options.path.c_str(), url.c_str(),
         link.c_str());
  printf("bpfprof: symbol server (source and assembly views) at %s\n", symbol_server.c_str());
  fflush(stdout);
  if (options.open_browser)
    if (const std::string browser = browser_command(); !browser.empty())
      open_in_browser(browser, link);
  struct sigaction sa {};
  sa.sa_handler = on_stop;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  signal(SIGCHLD, SIG_IGN);  // the browser launcher is not waited for
  std::atomic<bool> done = false;
  std::thread stopper(stop_on_signal, std::ref(server), std::ref(done));
  server.listen_after_bind();
  done = true;
  stopper.join();
  return 0;
}

}  // namespace bpfprof
