#include "userspace/serve/profile_libraries.h"

#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <stdexcept>

namespace bpfprof {

namespace {

// The whole file, inflated when it is gzip (zlib reads a plain file as it is).
std::optional<std::string> read_maybe_gzipped(const std::string& path, std::string* error) {
  gzFile file = gzopen(path.c_str(), "rb");
  if (file == nullptr) {
    *error = "cannot read " + path + ": " + strerror(errno ? errno : ENOMEM);
    return std::nullopt;
  }
  std::string text;
  char buffer[1 << 16];
  int n;
  while ((n = gzread(file, buffer, sizeof buffer)) > 0) text.append(buffer, static_cast<size_t>(n));
  int status = Z_OK;
  const char* message = gzerror(file, &status);
  gzclose(file);
  if (n < 0 || (status != Z_OK && status != Z_STREAM_END)) {
    *error = "cannot read " + path + ": " + message;
    return std::nullopt;
  }
  return text;
}

std::string string_field(const nlohmann::json& lib, const char* name) {
  auto it = lib.find(name);
  return it != lib.end() && it->is_string() ? it->get<std::string>() : std::string();
}

}  // namespace

std::vector<LibraryDescription> parse_profile_libraries(const std::string& json_text) {
  using Json = nlohmann::json;
  // Only `libs` is kept: the threads and tables of a large profile are skipped as they are read.
  const Json::parser_callback_t keep_libs = [](int depth, Json::parse_event_t event, Json& parsed) {
    return !(depth == 1 && event == Json::parse_event_t::key && parsed != "libs");
  };
  const Json profile = Json::parse(json_text, keep_libs, /*allow_exceptions=*/false);
  if (!profile.is_object() || !profile.contains("libs") || !profile["libs"].is_array())
    throw std::invalid_argument("not a processed profile (invalid JSON or no libs)");
  std::vector<LibraryDescription> libraries;
  for (const Json& lib : profile["libs"]) {
    if (!lib.is_object()) continue;
    LibraryDescription d;
    d.name = string_field(lib, "name");
    d.path = string_field(lib, "path");
    d.debug_name = string_field(lib, "debugName");
    d.debug_path = string_field(lib, "debugPath");
    d.code_id = string_field(lib, "codeId");
    d.breakpad_id = string_field(lib, "breakpadId");
    d.arch = string_field(lib, "arch");
    libraries.push_back(std::move(d));
  }
  return libraries;
}

std::optional<std::vector<LibraryDescription>> read_profile_libraries(const std::string& path,
                                                                      std::string* error) {
  errno = 0;
  std::optional<std::string> text = read_maybe_gzipped(path, error);
  if (!text) return std::nullopt;
  try {
    return parse_profile_libraries(*text);
  } catch (const std::exception& e) {
    *error = path + ": " + e.what();
    return std::nullopt;
  }
}

}  // namespace bpfprof
