// The crt stubs (.init and .fini from crti.o/crtn.o, no CFI): their shape from the bytes, on
// hand-written sections and on this machine's files, whose section headers say where they are.
#include "symbols/dwarf/crt_stubs.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <vector>

#include "symbols/util/unique_handle.h"
#include "tests/unit/test_helpers.h"

namespace bpfprof {
namespace {

using testing_helpers::ElfCloser;

// gcc's crti.o + crtn.o for an executable or library, as objdump shows them here.
// clang-format off
const std::vector<uint8_t> kInit = {
    0x48, 0x83, 0xec, 0x08,                    // sub $0x8,%rsp
    0x48, 0x8b, 0x05, 0xcd, 0x4e, 0x3c, 0x00,  // mov __gmon_start__@GOT(%rip),%rax
    0x48, 0x85, 0xc0,                          // test %rax,%rax
    0x74, 0x02,                                // je +2
    0xff, 0xd0,                                // call *%rax
    0x48, 0x83, 0xc4, 0x08,                    // add $0x8,%rsp
    0xc3};                                     // ret
// clang-format on
const std::vector<uint8_t> kFini = {0x48, 0x83, 0xec, 0x08, 0x48, 0x83, 0xc4, 0x08, 0xc3};

std::vector<uint8_t> with_endbr64(std::vector<uint8_t> bytes) {
  bytes.insert(bytes.begin(), {0xf3, 0x0f, 0x1e, 0xfa});
  return bytes;
}

TEST(CrtStubs, InitHasItsRulesFromTheBytes) {
  const std::optional<CrtStub> stub = match_crt_stub(0x1000, kInit.data(), kInit.size());
  ASSERT_TRUE(stub);
  EXPECT_EQ(stub->start, 0x1000u);
  EXPECT_EQ(stub->body, 0x1004u);
  EXPECT_EQ(stub->ret, 0x1016u);
  EXPECT_EQ(stub->end, 0x1017u);
  EXPECT_EQ(stub->cfa_offset_at(0x1000), 8u);   // the return address only
  EXPECT_EQ(stub->cfa_offset_at(0x1004), 16u);  // and the 8 bytes of `sub`
  EXPECT_EQ(stub->cfa_offset_at(0x1012), 16u);  // at `add` (after the call returns)
  EXPECT_EQ(stub->cfa_offset_at(0x1016), 8u);   // at `ret`
}

TEST(CrtStubs, Endbr64BeforeTheSubIsPartOfTheEntry) {
  const std::vector<uint8_t> bytes = with_endbr64(kFini);
  const std::optional<CrtStub> stub = match_crt_stub(0x2000, bytes.data(), bytes.size());
  ASSERT_TRUE(stub);
  EXPECT_EQ(stub->body, 0x2008u);
  EXPECT_EQ(stub->ret, 0x200cu);
  EXPECT_EQ(stub->cfa_offset_at(0x2004), 8u);
  EXPECT_EQ(stub->cfa_offset_at(0x2008), 16u);
}

TEST(CrtStubs, OtherShapesAreNotStubs) {
  std::vector<uint8_t> bytes = kInit;
  bytes[3] = 0x18;  // sub $0x18,%rsp
  EXPECT_FALSE(match_crt_stub(0, bytes.data(), bytes.size()));
  bytes = kInit;
  bytes.back() = 0x90;  // no ret at the end
  EXPECT_FALSE(match_crt_stub(0, bytes.data(), bytes.size()));
  bytes = kInit;
  bytes.insert(bytes.begin() + 4, 60, 0x90);  // longer than crti/crtn make them
  EXPECT_FALSE(match_crt_stub(0, bytes.data(), bytes.size()));
  EXPECT_FALSE(match_crt_stub(0, kInit.data(), 4));  // the sub alone
  EXPECT_FALSE(match_crt_stub(0, kInit.data(), 0));
  EXPECT_FALSE(match_crt_stub(0, nullptr, 9));
  // Shorter than both halves: the sub's bytes must not also count as the add's.
  const std::vector<uint8_t> overlapping = {0x48, 0x83, 0xec, 0x08, 0xc3};
  EXPECT_FALSE(match_crt_stub(0, overlapping.data(), overlapping.size()));
}

// The [start, end) of the sections named .init and .fini, from the section headers.
std::vector<std::pair<uint64_t, uint64_t>> init_and_fini(Elf* elf) {
  std::vector<std::pair<uint64_t, uint64_t>> sections;
  size_t names = 0;
  elf_getshdrstrndx(elf, &names);
  for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn != nullptr; scn = elf_nextscn(elf, scn)) {
    GElf_Shdr header;
    gelf_getshdr(scn, &header);
    const std::string name = elf_strptr(elf, names, header.sh_name);
    if (name == ".init" || name == ".fini")
      sections.emplace_back(header.sh_addr, header.sh_addr + header.sh_size);
  }
  return sections;
}

void expect_init_and_fini_found(const std::string& path) {
  elf_version(EV_CURRENT);
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  ASSERT_GE(fd.get(), 0) << path;
  std::unique_ptr<Elf, ElfCloser> elf(elf_begin(fd.get(), ELF_C_READ_MMAP, nullptr));
  const std::vector<CrtStub> stubs = find_crt_stubs(elf.get());
  const auto sections = init_and_fini(elf.get());
  ASSERT_EQ(stubs.size(), 2u) << path;
  ASSERT_EQ(sections.size(), 2u) << path;
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(stubs[i].start, sections[i].first) << path;
    EXPECT_EQ(stubs[i].end, sections[i].second) << path;
    EXPECT_EQ(find_crt_stub(stubs, stubs[i].ret), &stubs[i]);
  }
  EXPECT_EQ(find_crt_stub(stubs, stubs[0].start - 1), nullptr);
  EXPECT_EQ(find_crt_stub(stubs, stubs[1].end), nullptr);
}

TEST(CrtStubs, FoundInLibstdcxx) {
  expect_init_and_fini_found("/usr/lib/x86_64-linux-gnu/libstdc++.so.6");
}
TEST(CrtStubs, FoundInPython311) { expect_init_and_fini_found("/usr/bin/python3.11"); }
TEST(CrtStubs, FoundInThisTest) { expect_init_and_fini_found("/proc/self/exe"); }

}  // namespace
}  // namespace bpfprof
