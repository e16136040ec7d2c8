// The Firefox Profiler's symbolication API (samply's API.md), over the libraries of one
// profile: POST /symbolicate/v5 (names, files, lines and inlined functions for addresses),
// /source/v1 (the text of a source file, only one that the library's debug information
// names at the given address) and /asm/v1 (the library's machine code, disassembled).
#pragma once

#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "symbols/symbolizer.h"
#include "userspace/serve/library_finder.h"

namespace bpfprof {

struct ApiResponse {
  int status = 200;  // 400: malformed request; 404: unknown endpoint, library or file
  std::string json;  // the answer, or {"error": "..."}
};

class SymbolApi {
 public:
  SymbolApi(std::vector<LibraryDescription> libraries, SymbolizerOptions options);

  // `endpoint` is "/symbolicate/v5", "/source/v1" or "/asm/v1"; `request` the POST body.
  // Thread-safe (one request at a time); never throws.
  ApiResponse handle(std::string_view endpoint, std::string_view request);

  // The largest source file /source/v1 returns, and the most bytes /asm/v1 disassembles.
  static constexpr uint64_t kMaxSourceBytes = 32 << 20;
  static constexpr uint64_t kMaxCodeBytes = 1 << 20;

 private:
  friend struct SymbolApiHandlers;
  std::mutex mutex_;
  LibraryFinder finder_;
  Symbolizer symbolizer_;
  ElfCache elf_cache_;  // for /asm/v1: the files' architecture and load base
};

}  // namespace bpfprof
