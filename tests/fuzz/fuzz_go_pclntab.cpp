// libFuzzer target for Go's function tables (symbols/go/pclntab.h): any bytes, read as a
// pclntab (first byte 0) or as an ELF file around one (first byte 1), give a table or none,
// and every lookup in a table that comes out ends, within bounds, without a crash. First byte
// 2: the bytes are the code of asmcgocall, cgocallback and morestack (cgo_switches.h), the next
// byte their sp delta, and the code of a vDSO caller (vdso_calls.h), whose ranges must lie in it.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "symbols/go/cgo_switches.h"
#include "symbols/go/pclntab.h"
#include "symbols/go/vdso_calls.h"

using namespace bpfprof::go;

namespace {

constexpr uint64_t kTableAddress = 0x10000;
constexpr size_t kLookups = 256;

void exercise(const GoTable& table) {
  for (size_t i = 0; i < table.function_count() && i < kLookups; ++i) {
    std::optional<GoFunction> f = table.function(i);
    if (f && f->end > f->entry) table.frames_at(f->entry + (f->end - f->entry) / 2);
    if (f) table.is_root_at(f->entry);
  }
  // pcs spread over the whole text, and its edges.
  const uint64_t begin = table.text_begin(), end = table.text_end();
  const uint64_t step = (end - begin) / kLookups + 1;
  for (uint64_t pc = begin; pc < end && pc >= begin; pc += step) table.frames_at(pc);
  table.frames_at(begin - 1);
  table.frames_at(end);
  table.frames_at(end - 1);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  std::span<const uint8_t> bytes(data + 1, size - 1);
  if (data[0] == 2 && !bytes.empty()) {
    FrameLayout layout;
    layout.sp.push_back(
        {kTableAddress, kTableAddress + bytes.size(), static_cast<int8_t>(bytes[0])});
    const CgoSwitch systemstack{CgoSwitchKind::kSystemStack, kTableAddress, 8, true, -8, 0xc0};
    for (const char* name : {"runtime.asmcgocall", "runtime.cgocallback.abi0", "runtime.morestack"})
      find_cgo_switches(name, kTableAddress, bytes.subspan(1), layout, &systemstack);
    for (const bpfprof::CodeRange& range : frame_pointer_ranges(kTableAddress, bytes))
      if (range.start >= range.end || range.start < kTableAddress ||
          range.end > kTableAddress + bytes.size())
        __builtin_trap();
    return 0;
  }
  std::string error;
  std::unique_ptr<GoTable> table;
  if (data[0] == 0) {
    // The bytes are the pclntab and the memory its FUNCDATA offsets point into.
    PclntabInput input;
    input.pclntab = bytes;
    input.pclntab_vaddr = kTableAddress;
    input.gofunc = kTableAddress;
    input.memory.push_back({kTableAddress, bytes});
    table = GoTable::from_pclntab(input, &error);
  } else {
    table = GoTable::from_elf(bytes, &error);
  }
  if (table) exercise(*table);
  return 0;
}
