// What several unit tests use: fixture paths, system libraries, hex strings, unwind tables.
// (Unit tests are also built as one translation unit per batch: a helper that two tests need
// lives here, once.)
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <utility>
#include <variant>

#include "symbols/dwarf/unwind_table.h"

namespace bpfprof::testing_helpers {

inline constexpr uint64_t kNsPerMs = 1'000'000;
inline constexpr const char* kLibc = "/lib/x86_64-linux-gnu/libc.so.6";

// A Go fixture of tests/fixtures/go, built with the tests.
inline std::string go_fixture(const std::string& name) {
  return std::string(TEST_FIXTURE_DIR) + "/go/" + name;
}

// "4142" -> "AB".
inline std::string from_hex(const std::string& hex) {
  std::string bytes;
  for (size_t i = 0; i + 1 < hex.size(); i += 2)
    bytes += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
  return bytes;
}

// The unwind table of `path`; empty, and the test failed, when it could not be built.
inline UnwindTable table_of(const std::string& path) {
  UnwindTableResult result = build_unwind_table(path);
  if (const auto* error = std::get_if<UnwindTableError>(&result)) {
    ADD_FAILURE() << path << ": " << unwind_table_error_name(*error);
    return {};
  }
  return std::get<UnwindTable>(std::move(result));
}

}  // namespace bpfprof::testing_helpers
