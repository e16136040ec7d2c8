#include "userspace/session/serve.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string_view>

#include "symbols/util/text.h"
#include "symbols/util/unique_handle.h"
#include "userspace/session/launcher.h"

namespace bpfprof {

namespace {

volatile sig_atomic_t g_stop = 0;
void on_stop(int) { g_stop = 1; }

// The browser runs as the user who ran sudo, never as root.
void open_in_browser(const std::string& link) {
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
    execl("/usr/bin/xdg-open", "xdg-open", link.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
}

void send_all(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n <= 0) return;
    data.remove_prefix(static_cast<size_t>(n));
  }
}

constexpr char kCors[] =
    "Access-Control-Allow-Origin: *\r\n"
    "Access-Control-Allow-Methods: GET, HEAD, OPTIONS\r\n"
    "Access-Control-Allow-Headers: *\r\n";

// One request per connection; only GET/HEAD of `served_path` succeed.
void answer(int client, const std::string& served_path, const std::string& body,
            const char* content_type) {
  std::string request;
  char buffer[4096];
  while (request.find("\r\n\r\n") == std::string::npos && request.size() < 16384) {
    pollfd p{client, POLLIN, 0};
    if (poll(&p, 1, 5000) <= 0) return;  // a silent client is dropped
    ssize_t n = recv(client, buffer, sizeof buffer, 0);
    if (n <= 0) return;
    request.append(buffer, static_cast<size_t>(n));
  }
  const size_t line_end = request.find("\r\n");
  const std::string line = request.substr(0, line_end);
  const size_t space1 = line.find(' ');
  const size_t space2 = line.find(' ', space1 + 1);
  if (space1 == std::string::npos || space2 == std::string::npos) {
    send_all(client, "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
    return;
  }
  const std::string method = line.substr(0, space1);
  const std::string target = line.substr(space1 + 1, space2 - space1 - 1);
  if (method == "OPTIONS") {
    send_all(client, std::string("HTTP/1.1 204 No Content\r\n") + kCors +
                         "Content-Length: 0\r\nConnection: close\r\n\r\n");
    return;
  }
  if ((method != "GET" && method != "HEAD") || target != served_path) {
    send_all(client, std::string("HTTP/1.1 404 Not Found\r\n") + kCors +
                         "Content-Type: text/plain\r\nContent-Length: 10\r\nConnection: "
                         "close\r\n\r\nnot found\n");
    return;
  }
  std::string head = std::string("HTTP/1.1 200 OK\r\n") + kCors + "Content-Type: " + content_type +
                     "\r\nContent-Length: " + std::to_string(body.size()) +
                     "\r\nConnection: close\r\n\r\n";
  send_all(client, head);
  if (method == "GET") send_all(client, body);
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

std::string profiler_link(const std::string& url) {
  return "https://profiler.firefox.com/from-url/" + url_encode(url) + "/";
}

int run_serve(const ServeOptions& options) {
  std::ifstream in(options.path, std::ios::binary);
  if (!in) {
    fprintf(stderr, "bpfprof: cannot read %s: %s\n", options.path.c_str(), strerror(errno));
    return 2;
  }
  const std::string body((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const bool gzipped = body.size() >= 2 && static_cast<unsigned char>(body[0]) == 0x1f &&
                       static_cast<unsigned char>(body[1]) == 0x8b;
  UniqueFd listener(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  int one = 1;
  setsockopt(listener.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(options.port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);  // never reachable from other machines
  if (!listener.valid() ||
      bind(listener.get(), reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
      listen(listener.get(), 16) != 0) {
    fprintf(stderr, "bpfprof: cannot listen on 127.0.0.1:%u: %s\n", options.port, strerror(errno));
    return 2;
  }
  socklen_t length = sizeof address;
  getsockname(listener.get(), reinterpret_cast<sockaddr*>(&address), &length);
  const std::string served_path = "/" + url_encode(base_name(options.path));
  const std::string url =
      "http://127.0.0.1:" + std::to_string(ntohs(address.sin_port)) + served_path;
  const std::string link = profiler_link(url);
  printf("bpfprof: serving %s at %s (Ctrl-C to stop)\n%s\n", options.path.c_str(), url.c_str(),
         link.c_str());
  fflush(stdout);
  if (options.open_browser && (getenv("DISPLAY") || getenv("WAYLAND_DISPLAY")) &&
      access("/usr/bin/xdg-open", X_OK) == 0)
    open_in_browser(link);
  struct sigaction sa {};
  sa.sa_handler = on_stop;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  signal(SIGCHLD, SIG_IGN);  // the browser launcher is not waited for
  while (!g_stop) {
    pollfd p{listener.get(), POLLIN, 0};
    if (poll(&p, 1, 500) <= 0) continue;
    UniqueFd client(accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
    if (client.valid())
      answer(client.get(), served_path, body, gzipped ? "application/gzip" : "application/json");
  }
  return 0;
}

}  // namespace bpfprof
