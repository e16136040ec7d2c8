// libcurl's functions as the uploader calls them, from the library loaded when first used
// (see symbols/util/lazy_library.h): a recording that uploads nothing loads neither libcurl
// nor the TLS, Kerberos and LDAP libraries it pulls in. Without the library each fails as
// libcurl would, and curl_easy_strerror says why. The two variadic ones: curl_on_demand.h.
#include "userspace/session/curl_on_demand.h"

#include <string>

#include "symbols/util/lazy_library.h"

namespace {

// Its failures are the uploader's to say (curl_easy_strerror gives why).
constinit bpfprof::LazyLibrary curl_library(BPFPROF_CURL_SONAME, nullptr);

}  // namespace

namespace bpfprof {

CurlSetopt curl_setopt_function() {
  static auto* f = curl_library.function<decltype(curl_easy_setopt)>("curl_easy_setopt");
  return f;
}

CurlGetinfo curl_getinfo_function() {
  static auto* f = curl_library.function<decltype(curl_easy_getinfo)>("curl_easy_getinfo");
  return f;
}

}  // namespace bpfprof

extern "C" {

CURLcode curl_global_init(long flags) {
  static auto* f = curl_library.function<decltype(curl_global_init)>("curl_global_init");
  return f ? f(flags) : CURLE_FAILED_INIT;
}

CURL* curl_easy_init() {
  static auto* f = curl_library.function<decltype(curl_easy_init)>("curl_easy_init");
  return f ? f() : nullptr;
}

void curl_easy_cleanup(CURL* curl) {
  static auto* f = curl_library.function<decltype(curl_easy_cleanup)>("curl_easy_cleanup");
  if (f) f(curl);
}

CURLcode curl_easy_perform(CURL* curl) {
  static auto* f = curl_library.function<decltype(curl_easy_perform)>("curl_easy_perform");
  return f ? f(curl) : CURLE_FAILED_INIT;
}

const char* curl_easy_strerror(CURLcode code) {
  static auto* f = curl_library.function<decltype(curl_easy_strerror)>("curl_easy_strerror");
  if (f) return f(code);
  static const std::string why = curl_library.error();
  return why.c_str();
}

char* curl_easy_escape(CURL* curl, const char* text, int length) {
  static auto* f = curl_library.function<decltype(curl_easy_escape)>("curl_easy_escape");
  return f ? f(curl, text, length) : nullptr;
}

void curl_free(void* p) {
  static auto* f = curl_library.function<decltype(curl_free)>("curl_free");
  if (f) f(p);
}

curl_slist* curl_slist_append(curl_slist* list, const char* text) {
  static auto* f = curl_library.function<decltype(curl_slist_append)>("curl_slist_append");
  return f ? f(list, text) : nullptr;
}

void curl_slist_free_all(curl_slist* list) {
  static auto* f = curl_library.function<decltype(curl_slist_free_all)>("curl_slist_free_all");
  if (f) f(list);
}

}  // extern "C"
