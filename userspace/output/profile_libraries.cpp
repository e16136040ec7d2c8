#include "userspace/output/profile_libraries.h"

#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <istream>
#include <nlohmann/json.hpp>
#include <stdexcept>

namespace bpfprof {

namespace {

using Json = nlohmann::json;

// Only `libs` is kept: the threads and tables of a large profile are skipped as they are read.
bool keep_libs(int depth, Json::parse_event_t event, Json& parsed) {
  return !(depth == 1 && event == Json::parse_event_t::key && parsed != "libs");
}

std::vector<LibraryDescription> libraries_of(const Json& profile) {
  if (!profile.is_object() || !profile.contains("libs"))
    throw std::invalid_argument("not a processed profile (invalid JSON or no libs)");
  return libraries_from_json(profile["libs"]);
}

}  // namespace

std::optional<std::string> GzStreamBuf::error() const {
  int status = Z_OK;
  const char* message = gzerror(file_, &status);
  return status == Z_OK || status == Z_STREAM_END ? std::nullopt
                                                  : std::optional<std::string>(message);
}

GzStreamBuf::int_type GzStreamBuf::underflow() {
  const int n = gzread(file_, buffer_, sizeof buffer_);
  if (n <= 0) return traits_type::eof();
  setg(buffer_, buffer_, buffer_ + n);
  return traits_type::to_int_type(buffer_[0]);
}

std::string string_member(const Json& object, const char* key) {
  auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : std::string();
}

std::vector<LibraryDescription> libraries_from_json(const Json& libs) {
  if (!libs.is_array()) throw std::invalid_argument("libs is not an array");
  std::vector<LibraryDescription> libraries;
  for (const Json& lib : libs) {
    if (!lib.is_object()) throw std::invalid_argument("an entry of libs is not an object");
    LibraryDescription d;
    d.name = string_member(lib, "name");
    d.path = string_member(lib, "path");
    d.debug_name = string_member(lib, "debugName");
    d.debug_path = string_member(lib, "debugPath");
    d.code_id = string_member(lib, "codeId");
    d.breakpad_id = string_member(lib, "breakpadId");
    d.arch = string_member(lib, "arch");
    libraries.push_back(std::move(d));
  }
  return libraries;
}

std::vector<LibraryDescription> parse_profile_libraries(const std::string& json_text) {
  return libraries_of(Json::parse(json_text, keep_libs, /*allow_exceptions=*/false));
}

std::optional<std::vector<LibraryDescription>> read_profile_libraries(const std::string& path,
                                                                      std::string* error) {
  errno = 0;
  gzFile file = gzopen(path.c_str(), "rb");
  if (file == nullptr) {
    *error = "cannot read " + path + ": " + strerror(errno ? errno : ENOMEM);
    return std::nullopt;
  }
  GzStreamBuf buffer(file);
  std::istream in(&buffer);
  const Json profile = Json::parse(in, keep_libs, /*allow_exceptions=*/false);
  if (std::optional<std::string> zlib_error = buffer.error()) {
    *error = "cannot read " + path + ": " + *zlib_error;
    return std::nullopt;
  }
  try {
    return libraries_of(profile);
  } catch (const std::exception& e) {
    *error = path + ": " + e.what();
    return std::nullopt;
  }
}

}  // namespace bpfprof
