// Thread roots from call-frame information: the outermost frames of a thread (where the CFI
// says the return address is undefined, or the CFI-less entry stub of the dynamic loader)
// and nothing else.
#include <elf.h>
#include <gelf.h>
#include <gtest/gtest.h>
#include <link.h>
#include <sys/auxv.h>

#include <fstream>
#include <string>

#include "bpf/unwind_table.h"
#include "symbols/dwarf/dwarf_module.h"
#include "symbols/elf/elf_file.h"
#include "symbols/util/proc_maps.h"

namespace bpfprof {
namespace {

// The file and the file's own virtual address of a code address of this process.
struct CodeLocation {
  std::string path;
  uint64_t vaddr = 0;
};
CodeLocation locate(uint64_t address) {
  const std::vector<MapEntry> maps =
      read_proc_maps(getpid()).value();  // (a temporary's value() would dangle)
  for (const MapEntry& m : maps) {
    if (!m.contains(address)) continue;
    std::string error;
    std::unique_ptr<ElfFile> elf = ElfFile::open(m.path, &error);
    if (!elf) {
      ADD_FAILURE() << error;
      break;
    }
    return {m.path, elf->file_offset_to_vaddr(address - m.start + m.file_offset).value_or(0)};
  }
  return {};
}

TEST(ThreadRoot, TheProgramsEntryPointIsARootAndMainIsNot) {
  const CodeLocation start = locate(getauxval(AT_ENTRY));  // _start of this test binary
  ASSERT_FALSE(start.path.empty());
  std::unique_ptr<DwarfModule> module = DwarfModule::open(start.path, {});
  ASSERT_NE(module, nullptr);
  EXPECT_TRUE(module->is_thread_root(start.vaddr + 4));
  const CodeLocation in_test = locate(reinterpret_cast<uint64_t>(&locate));
  EXPECT_FALSE(module->is_thread_root(in_test.vaddr + 1));
}

TEST(ThreadRoot, TheDynamicLoadersEntryStubIsARootWithoutCfi) {
  const CodeLocation loader = locate(getauxval(AT_BASE) + 0x1000);  // some code of ld.so
  ASSERT_FALSE(loader.path.empty());
  std::unique_ptr<DwarfModule> module = DwarfModule::open(loader.path, {});
  ASSERT_NE(module, nullptr);
  // Its _start calls _dl_start right away; the return address lies a few bytes in.
  const auto* header = reinterpret_cast<const ElfW(Ehdr)*>(getauxval(AT_BASE));
  EXPECT_TRUE(module->is_thread_root(header->e_entry + 7));
  EXPECT_FALSE(module->is_thread_root(header->e_entry + 0x400));
}

// A gcc-built program's _start has an FDE; the 64 bytes taken for a CFI-less entry stub then
// reach into crtstuff's deregister_tm_clones, whose leaf samples must not end as roots.
TEST(ThreadRoot, CodeAfterAnFdeCoveredStartIsNoRoot) {
  const std::string program = std::string(TEST_FIXTURE_DIR) + "/unwind_qsort";
  const std::unique_ptr<ElfFile> elf = ElfFile::open(program, nullptr);
  ASSERT_NE(elf, nullptr);
  std::unique_ptr<DwarfModule> module = DwarfModule::open(program, {});
  ASSERT_NE(module, nullptr);
  const Symbol* start = nullptr;
  const Symbol* after = nullptr;
  for (const Symbol& s : elf->symbols()) {
    if (s.name == "_start") start = &s;
    if (s.name == "deregister_tm_clones") after = &s;
  }
  ASSERT_TRUE(start && after);
  ASSERT_LT(after->address, start->address + 64) << "not within the stub's reach";
  EXPECT_TRUE(module->is_thread_root(start->address + 4));
  EXPECT_FALSE(module->is_thread_root(after->address + 4));
}

TEST(ThreadRoot, CloneAndClone3StartThreadsInLibc) {
  const CodeLocation libc = locate(reinterpret_cast<uint64_t>(&fopen));
  ASSERT_FALSE(libc.path.empty());
  std::unique_ptr<DwarfModule> module = DwarfModule::open(libc.path, {});
  ASSERT_NE(module, nullptr);
  // Somewhere in clone/clone3 the CFI marks the child's outermost frame; in fopen, never.
  std::unique_ptr<ElfFile> elf = ElfFile::open(libc.path, nullptr);
  ASSERT_NE(elf, nullptr);
  bool clone_has_root = false;
  for (const Symbol& s : elf->symbols()) {
    if (s.name != "clone" && s.name != "__clone") continue;
    for (uint64_t a = s.address; a < s.address + std::max<uint64_t>(s.size, 1); ++a)
      clone_has_root = clone_has_root || module->is_thread_root(a);
  }
  EXPECT_TRUE(clone_has_root);
  for (uint64_t a = libc.vaddr; a < libc.vaddr + 64; ++a)
    EXPECT_FALSE(module->is_thread_root(a)) << a;
}

// Just past clone's and clone3's syscall no CFI covers the code (glibc ends it before the
// syscall): a stack that ends at the child's first three instructions is a new thread's first
// moment, not a cut one. The kernel walk takes the same bytes for it (bpf/unwind_table.h).
TEST(ThreadRoot, TheChildSideOfClonesSyscallIsARoot) {
  const CodeLocation libc = locate(reinterpret_cast<uint64_t>(&fopen));
  ASSERT_FALSE(libc.path.empty());
  std::unique_ptr<DwarfModule> module = DwarfModule::open(libc.path, {});
  ASSERT_NE(module, nullptr);
  GElf_Shdr text{};
  for (Elf_Scn* scn = elf_nextscn(module->elf(), nullptr); scn;
       scn = elf_nextscn(module->elf(), scn))
    if (gelf_getshdr(scn, &text) && text.sh_addr <= libc.vaddr &&
        libc.vaddr < text.sh_addr + text.sh_size)
      break;
  const std::vector<uint8_t> code = read_code_bytes(module->elf(), text.sh_addr, text.sh_size);
  ASSERT_EQ(code.size(), text.sh_size);
  int children = 0;
  for (size_t i = 0; i + BPFPROF_CLONE_CODE_BYTES <= code.size(); ++i) {
    if (!bpfprof_is_clone_child_entry(&code[i])) continue;
    const uint64_t child_pc = text.sh_addr + i + 2;
    EXPECT_EQ(module->cfi_function_at(child_pc), nullptr) << std::hex << child_pc << " has CFI";
    for (uint64_t step : {0, 3, 5})  // test, jl, je: the child's until its thread start's CFI
      EXPECT_TRUE(module->is_thread_root(child_pc + step)) << std::hex << child_pc << "+" << step;
    EXPECT_FALSE(module->is_thread_root(child_pc + 7)) << "the ret: the parent's only";
    EXPECT_FALSE(module->is_thread_root(child_pc - 2)) << "the syscall";
    ++children;
  }
  EXPECT_EQ(children, 2) << "clone and clone3";
}

}  // namespace
}  // namespace bpfprof
