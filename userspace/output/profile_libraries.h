// The libraries a processed profile names (its `libs`: name, path, debug name, build-id),
// read back from the file: `bpfprof serve` finds them again with these, and `convert` reads
// them with the rest of the profile. The one reader of `libs`, and of gzip'ed profiles.
#pragma once

#include <zlib.h>

#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <streambuf>
#include <string>
#include <vector>

#include "symbols/symbolizer.h"

namespace bpfprof {

// The `libs` of the profile at `path` (.json.gz or plain .json); nullopt with a one-line
// reason in *error when it cannot be read or is not a profile.
std::optional<std::vector<LibraryDescription>> read_profile_libraries(const std::string& path,
                                                                      std::string* error);

// The same from the profile's JSON text (throws std::invalid_argument when it is not one).
std::vector<LibraryDescription> parse_profile_libraries(const std::string& json_text);

// A profile's `libs` array, in its order (the lib indices of the resources point into it).
// Throws std::invalid_argument when it is not an array or an entry is not an object: a
// skipped entry would move every later library's index. Missing strings are empty.
std::vector<LibraryDescription> libraries_from_json(const nlohmann::json& libs);

// An object's string member; empty when it is absent or not a string.
std::string string_member(const nlohmann::json& object, const char* key);

// A file read through zlib (gzip inflated, a plain file as it is), as a stream: a large
// profile is parsed as it is read, never held whole in memory. Owns the gzFile.
class GzStreamBuf : public std::streambuf {
 public:
  explicit GzStreamBuf(gzFile file) : file_(file) {}
  ~GzStreamBuf() override { gzclose(file_); }
  GzStreamBuf(const GzStreamBuf&) = delete;
  GzStreamBuf& operator=(const GzStreamBuf&) = delete;
  // The zlib error that ended the stream early, if any.
  std::optional<std::string> error() const;

 protected:
  int_type underflow() override;

 private:
  gzFile file_;
  char buffer_[1 << 16];
};

}  // namespace bpfprof
