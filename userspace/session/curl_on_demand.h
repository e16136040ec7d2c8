// libcurl opened when first used (curl_on_demand.cpp). Its other functions keep their names;
// curl_easy_setopt and curl_easy_getinfo, variadic, are called through curl_set and curl_get
// with the one argument's own type (a shim of a variadic function would have to guess it).
#pragma once

#include <curl/curl.h>

namespace bpfprof {

using CurlSetopt = CURLcode (*)(CURL*, CURLoption, ...);
using CurlGetinfo = CURLcode (*)(CURL*, CURLINFO, ...);
CurlSetopt curl_setopt_function();    // nullptr without libcurl
CurlGetinfo curl_getinfo_function();  // nullptr without libcurl

template <typename Value>
CURLcode curl_set(CURL* curl, CURLoption option, Value value) {
  const CurlSetopt set = curl_setopt_function();
  return set ? set(curl, option, value) : CURLE_FAILED_INIT;
}

template <typename Answer>
CURLcode curl_get(CURL* curl, CURLINFO info, Answer* answer) {
  const CurlGetinfo get = curl_getinfo_function();
  return get ? get(curl, info, answer) : CURLE_FAILED_INIT;
}

}  // namespace bpfprof
