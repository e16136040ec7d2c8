// libFuzzer target 8: the symbol server's API (userspace/serve/symbol_api.h) with arbitrary
// requests: the first byte picks the endpoint, the rest is the POST body. The API knows one
// library, this fuzzer's own executable, as debugName "self", breakpadId "SELF", name
// "self" and its real code id, so that well-formed requests reach the symbolizer, the
// source check and the disassembler. Any answer is fine; a crash, leak or hang is not.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "symbols/elf/elf_file.h"
#include "symbols/util/text.h"
#include "userspace/serve/symbol_api.h"

using namespace bpfprof;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static SymbolApi* api = [] {
    LibraryDescription self;
    self.name = self.debug_name = "self";
    self.path = self.debug_path = "/proc/self/exe";
    self.breakpad_id = "SELF";
    std::unique_ptr<ElfFile> elf = ElfFile::open(self.path, nullptr);
    if (elf) self.code_id = hex_string(elf->build_id());
    return new SymbolApi({self}, SymbolizerOptions{});
  }();
  if (size == 0) return 0;
  static const char* const kEndpoints[] = {"/symbolicate/v5", "/source/v1", "/asm/v1", "/x"};
  const std::string_view endpoint = kEndpoints[data[0] % 4];
  const ApiResponse response =
      api->handle(endpoint, std::string_view(reinterpret_cast<const char*>(data + 1), size - 1));
  if (response.json.empty() || response.status < 200 || response.status > 599) abort();
  return 0;
}
