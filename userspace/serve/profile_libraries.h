// The libraries a profile names (its `libs`: name, path, debug name, build-id), read back
// from the profile file so that `bpfprof serve` can find them again.
#pragma once

#include <optional>
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

}  // namespace bpfprof
