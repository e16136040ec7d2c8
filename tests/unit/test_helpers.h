// What several unit tests use: fixture paths, system libraries, hex strings, unwind tables.
// (Unit tests are also built as one translation unit per batch: a helper that two tests need
// lives here, once.)
#pragma once

#include <gtest/gtest.h>
#include <libelf.h>

#include <cstdint>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "symbols/dwarf/unwind_table.h"
#include "symbols/go/pclntab.h"

namespace bpfprof::testing_helpers {

inline constexpr uint64_t kNsPerMs = 1'000'000;
inline constexpr const char* kLibc = "/lib/x86_64-linux-gnu/libc.so.6";
inline const std::string kPltLoop = std::string(TEST_FIXTURE_DIR) + "/plt_loop";
inline const std::string kBigFrame = std::string(TEST_FIXTURE_DIR) + "/big_frame";
// A current release of esbuild (Go 1.26, stripped), installed by scripts/setup-profiler-cli.sh.
inline const std::string kEsbuild =
    std::string(TEST_SOURCE_DIR) + "/tests/integration/node_modules/@esbuild/linux-x64/bin/esbuild";

// Closes a libelf handle (std::unique_ptr<Elf, ElfCloser>).
struct ElfCloser {
  void operator()(Elf* elf) const noexcept { elf_end(elf); }
};

// A Go fixture of tests/fixtures/go, built with the tests.
inline std::string go_fixture(const std::string& name) {
  return std::string(TEST_FIXTURE_DIR) + "/go/" + name;
}

// The Go function table of the binary at `path` (null where it has none).
inline std::unique_ptr<go::GoTable> go_table(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<uint8_t> bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  return go::GoTable::from_elf(bytes, nullptr);
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
