#include "symbols/dwarf/crt_stubs.h"

#include <algorithm>
#include <cstring>
#include <string_view>

#include "bpf/unwind_table.h"
#include "symbols/elf/elf_file.h"
#include "symbols/util/sorted_ranges.h"

namespace bpfprof {
namespace {

constexpr uint8_t kEndbr64[] = {0xf3, 0x0f, 0x1e, 0xfa};
constexpr uint8_t kSubRsp8[] = {0x48, 0x83, 0xec, 0x08};
constexpr uint8_t kAddRsp8Ret[] = {0x48, 0x83, 0xc4, 0x08, 0xc3};
// crti/crtn's sections are a few calls long (23 bytes in most files); a longer section with
// these ends is not theirs, and what lies between could move rsp.
constexpr size_t kMaxStubSize = 64;

bool starts_with(const uint8_t* bytes, size_t size, const uint8_t* prefix, size_t length) {
  return size >= length && memcmp(bytes, prefix, length) == 0;
}

}  // namespace

std::optional<CrtStub> match_crt_stub(uint64_t address, const uint8_t* bytes, size_t size) {
  if (bytes == nullptr || size > kMaxStubSize) return std::nullopt;
  size_t at = starts_with(bytes, size, kEndbr64, sizeof(kEndbr64)) ? sizeof(kEndbr64) : 0;
  if (!starts_with(bytes + at, size - at, kSubRsp8, sizeof(kSubRsp8))) return std::nullopt;
  at += sizeof(kSubRsp8);
  if (size - at < sizeof(kAddRsp8Ret) ||
      memcmp(bytes + size - sizeof(kAddRsp8Ret), kAddRsp8Ret, sizeof(kAddRsp8Ret)) != 0)
    return std::nullopt;
  return CrtStub{address, address + at, address + size - 1, address + size};
}

std::vector<CrtStub> find_crt_stubs(Elf* elf) {
  std::vector<CrtStub> stubs;
  size_t names = 0;
  if (elf == nullptr || elf_getshdrstrndx(elf, &names) != 0) return stubs;
  for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn != nullptr; scn = elf_nextscn(elf, scn)) {
    GElf_Shdr header;
    if (gelf_getshdr(scn, &header) == nullptr || header.sh_type != SHT_PROGBITS) continue;
    const char* name = elf_strptr(elf, names, header.sh_name);
    if (name == nullptr || (std::string_view(name) != ".init" && std::string_view(name) != ".fini"))
      continue;
    const Elf_Data* data = elf_getdata(scn, nullptr);
    if (data == nullptr || data->d_size != header.sh_size) continue;
    std::optional<CrtStub> stub =
        match_crt_stub(header.sh_addr, static_cast<const uint8_t*>(data->d_buf), data->d_size);
    if (stub) stubs.push_back(*stub);
  }
  std::sort(stubs.begin(), stubs.end(),
            [](const CrtStub& a, const CrtStub& b) { return a.start < b.start; });
  return stubs;
}

const CrtStub* find_crt_stub(const std::vector<CrtStub>& stubs, uint64_t pc) {
  const CrtStub* stub = last_starting_at_or_below(stubs, pc, &CrtStub::start);
  return stub && stub->contains(pc) ? stub : nullptr;
}

std::optional<EntryStub> entry_stub(Elf* elf) {
  constexpr uint64_t kEntryStubBytes = 64;
  GElf_Ehdr header;
  if (elf == nullptr || gelf_getehdr(elf, &header) == nullptr || header.e_entry == 0)
    return std::nullopt;
  return EntryStub{header.e_entry, header.e_entry + kEntryStubBytes};
}

bool is_clone_child_start(Elf* elf, uint64_t vaddr) {
  if (elf == nullptr || vaddr < BPFPROF_CLONE_WINDOW_BEFORE) return false;
  const std::vector<uint8_t> window =
      read_code_bytes(elf, vaddr - BPFPROF_CLONE_WINDOW_BEFORE, BPFPROF_CLONE_WINDOW_BYTES);
  return window.size() == BPFPROF_CLONE_WINDOW_BYTES && bpfprof_in_clone_child_start(window.data());
}

}  // namespace bpfprof
