#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <string>

#include "symbols/elf/elf_file.h"
#include "symbols/elf/symbol_cache.h"
#include "tests/unit/test_commands.h"

namespace bpfprof {
namespace {

namespace fs = std::filesystem;
using testing_helpers::run_command;
using testing_helpers::write_file;

constexpr char kLibcPath[] = "/usr/lib/x86_64-linux-gnu/libc.so.6";

// A C program with the symbol shapes the reader must handle: plain functions, a local
// function with a global and a weak alias, and an untyped size-0 assembly label.
constexpr char kSymbolsProgram[] = R"(
int bpfprof_global_counter;
__attribute__((noinline)) int bpfprof_alpha(int x) { return x * 3 + bpfprof_global_counter; }
__attribute__((noinline)) int bpfprof_beta(int x) {
  int sum = 0;
  for (int i = 0; i < x; ++i) sum += bpfprof_alpha(i);
  return sum;
}
static __attribute__((noinline, used)) int bpfprof_local_impl(int x) { return x + 7; }
int bpfprof_global_alias(int x) __attribute__((alias("bpfprof_local_impl")));
int bpfprof_weak_alias(int x) __attribute__((weak, alias("bpfprof_local_impl")));
__asm__(".text\n.globl bpfprof_untyped_label\nbpfprof_untyped_label:\n"
        "  nop\n  nop\n  nop\n  nop\n  ret\n");
#ifndef NO_MAIN
int main(int argc, char** argv) {
  (void)argv;
  return bpfprof_beta(argc) + bpfprof_global_alias(argc);
}
#endif
)";

// name -> address, as `nm` (or `nm -D`) reports defined symbols.
std::map<std::string, uint64_t> nm_addresses(const std::string& path, bool dynamic = false) {
  std::map<std::string, uint64_t> addresses;
  std::istringstream lines(run_command("nm --defined-only " + std::string(dynamic ? "-D " : "") +
                                       path + " 2>/dev/null"));
  std::string address, type, name;
  while (lines >> address >> type >> name) {
    const size_t version = name.find('@');  // nm -D prints malloc@@GLIBC_2.2.5
    addresses.emplace(name.substr(0, version), std::stoull(address, nullptr, 16));
  }
  return addresses;
}

std::string readelf_build_id(const std::string& path) {
  std::istringstream lines(run_command("readelf -n " + path + " 2>/dev/null"));
  std::string line;
  while (std::getline(lines, line)) {
    const size_t label = line.find("Build ID: ");
    if (label != std::string::npos) return line.substr(label + 10);
  }
  return "";
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

class CompiledProgramsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    char directory_template[] = "/tmp/bpfprof_elf_test_XXXXXX";
    if (mkdtemp(directory_template) == nullptr) return;
    directory_ = directory_template;
    write_file(directory_ / "program.c", kSymbolsProgram);
    const std::string common = "cc -O0 -fno-omit-frame-pointer -Wl,--build-id=sha1 ";
    const std::string source = (directory_ / "program.c").string();
    compiled_ =
        std::system((common + "-fPIE -pie " + source + " -o " + path("pie")).c_str()) == 0 &&
        std::system((common + "-fno-pie -no-pie " + source + " -o " + path("nopie")).c_str()) ==
            0 &&
        std::system(
            (common + "-DNO_MAIN -fPIC -shared " + source + " -o " + path("lib.so")).c_str()) ==
            0 &&
        std::system(
            (common + "-fPIE -pie -rdynamic -s " + source + " -o " + path("pie_stripped_rdynamic"))
                .c_str()) == 0 &&
        std::system((common + "-fPIE -pie -s " + source + " -o " + path("pie_stripped")).c_str()) ==
            0;
  }
  static void TearDownTestSuite() {
    std::error_code ignored;
    if (!directory_.empty()) fs::remove_all(directory_, ignored);
  }
  void SetUp() override {
    if (!compiled_) GTEST_SKIP() << "cannot compile test programs with cc";
  }

  static std::string path(const std::string& name) { return (directory_ / name).string(); }

  static std::unique_ptr<ElfFile> open_or_fail(const std::string& file_path) {
    std::string error;
    auto file = ElfFile::open(file_path, &error);
    EXPECT_NE(file, nullptr) << error;
    return file;
  }

  // Every function nm knows resolves to itself, also from an address inside it.
  static void expect_nm_functions_resolve(const ElfFile& file, const std::string& file_path,
                                          bool dynamic) {
    const auto nm = nm_addresses(file_path, dynamic);
    for (const std::string name : {"bpfprof_alpha", "bpfprof_beta"}) {
      ASSERT_TRUE(nm.count(name)) << name;
      const uint64_t address = nm.at(name);
      const Symbol* symbol = file.lookup(address);
      ASSERT_NE(symbol, nullptr) << name;
      EXPECT_EQ(symbol->name, name);
      EXPECT_EQ(symbol->address, address);
      EXPECT_GT(symbol->size, 4u);
      const Symbol* inside = file.lookup(address + 4);
      ASSERT_NE(inside, nullptr);
      EXPECT_EQ(inside->name, name);
    }
  }

  static inline fs::path directory_;
  static inline bool compiled_ = false;
};

TEST_F(CompiledProgramsTest, PieExecutable) {
  auto file = open_or_fail(path("pie"));
  ASSERT_NE(file, nullptr);
  EXPECT_TRUE(file->is_elf_type_dyn());
  EXPECT_FALSE(file->is_elf_type_exec());
  EXPECT_EQ(file->architecture(), "x86_64");
  EXPECT_EQ(file->base_vaddr(), 0u);
  EXPECT_EQ(file->symbol_source(), "symtab");
  EXPECT_EQ(file->build_id().size(), 20u);
  EXPECT_EQ(file->build_id_hex(), readelf_build_id(path("pie")));
  expect_nm_functions_resolve(*file, path("pie"), false);
  // Not code: a data symbol's address resolves to nothing.
  const uint64_t counter = nm_addresses(path("pie")).at("bpfprof_global_counter");
  const Symbol* at_counter = file->lookup(counter);
  EXPECT_TRUE(at_counter == nullptr || at_counter->name != "bpfprof_global_counter");
  EXPECT_EQ(file->lookup(0), nullptr);
  EXPECT_EQ(file->lookup(UINT64_MAX), nullptr);
}

TEST_F(CompiledProgramsTest, NonPieExecutable) {
  auto file = open_or_fail(path("nopie"));
  ASSERT_NE(file, nullptr);
  EXPECT_TRUE(file->is_elf_type_exec());
  EXPECT_EQ(file->base_vaddr(), 0x400000u);
  EXPECT_EQ(file->symbol_source(), "symtab");
  EXPECT_EQ(file->build_id_hex(), readelf_build_id(path("nopie")));
  expect_nm_functions_resolve(*file, path("nopie"), false);
  EXPECT_GT(nm_addresses(path("nopie")).at("bpfprof_alpha"), 0x400000u);
}

TEST_F(CompiledProgramsTest, SharedLibrary) {
  auto file = open_or_fail(path("lib.so"));
  ASSERT_NE(file, nullptr);
  EXPECT_TRUE(file->is_elf_type_dyn());
  EXPECT_EQ(file->base_vaddr(), 0u);
  EXPECT_EQ(file->build_id_hex(), readelf_build_id(path("lib.so")));
  expect_nm_functions_resolve(*file, path("lib.so"), false);
}

TEST_F(CompiledProgramsTest, AliasesShowTheGlobalName) {
  auto file = open_or_fail(path("pie"));
  ASSERT_NE(file, nullptr);
  const auto nm = nm_addresses(path("pie"));
  const uint64_t address = nm.at("bpfprof_local_impl");
  ASSERT_EQ(address, nm.at("bpfprof_global_alias"));
  ASSERT_EQ(address, nm.at("bpfprof_weak_alias"));
  const Symbol* symbol = file->lookup(address + 1);
  ASSERT_NE(symbol, nullptr);
  EXPECT_EQ(symbol->name, "bpfprof_global_alias");
  // One entry per address.
  for (size_t i = 1; i < file->symbols().size(); ++i) {
    EXPECT_LT(file->symbols()[i - 1].address, file->symbols()[i].address);
  }
}

TEST_F(CompiledProgramsTest, UntypedLabelExtendsToNextSymbol) {
  auto file = open_or_fail(path("pie"));
  ASSERT_NE(file, nullptr);
  const uint64_t label = nm_addresses(path("pie")).at("bpfprof_untyped_label");
  for (uint64_t offset : {0, 2, 4}) {  // nop, nop, ret
    const Symbol* symbol = file->lookup(label + offset);
    ASSERT_NE(symbol, nullptr) << offset;
    EXPECT_EQ(symbol->name, "bpfprof_untyped_label");
  }
  const Symbol* symbol = file->lookup(label);
  ASSERT_NE(symbol, nullptr);
  EXPECT_GE(symbol->size, 5u);
  // It stops where the next symbol begins.
  const auto next =
      std::upper_bound(file->symbols().begin(), file->symbols().end(), label,
                       [](uint64_t value, const Symbol& s) { return value < s.address; });
  if (next != file->symbols().end()) {
    EXPECT_EQ(label + symbol->size, next->address);
  }
}

TEST_F(CompiledProgramsTest, StrippedFallsBackToDynsym) {
  auto exported = open_or_fail(path("pie_stripped_rdynamic"));
  ASSERT_NE(exported, nullptr);
  EXPECT_EQ(exported->symbol_source(), "dynsym");
  expect_nm_functions_resolve(*exported, path("pie_stripped_rdynamic"), true);

  // Nothing exported and no .symtab: only the names bpfprof gives PLT slots and the entry
  // point, but segments and build id still work.
  auto bare = open_or_fail(path("pie_stripped"));
  ASSERT_NE(bare, nullptr);
  EXPECT_EQ(bare->symbol_source(), "none");
  for (const Symbol& symbol : bare->symbols()) {
    EXPECT_TRUE(symbol.name == "_start" || symbol.name.ends_with("@plt")) << symbol.name;
  }
  EXPECT_FALSE(bare->load_segments().empty());
  EXPECT_EQ(bare->build_id_hex(), readelf_build_id(path("pie_stripped")));
}

TEST_F(CompiledProgramsTest, FileOffsetsRoundTripThroughSegments) {
  for (const std::string name : {"pie", "nopie", "lib.so"}) {
    auto file = open_or_fail(path(name));
    ASSERT_NE(file, nullptr);
    ASSERT_FALSE(file->load_segments().empty());
    bool has_executable_segment = false;
    for (const LoadSegment& segment : file->load_segments()) {
      has_executable_segment |= segment.executable();
      if (segment.file_size == 0) continue;
      const uint64_t inside = segment.file_offset + segment.file_size / 2;
      const auto vaddr = file->file_offset_to_vaddr(inside);
      ASSERT_TRUE(vaddr.has_value()) << name;
      EXPECT_EQ(*vaddr, inside - segment.file_offset + segment.vaddr);
      EXPECT_EQ(file->vaddr_to_file_offset(*vaddr), inside);
    }
    EXPECT_TRUE(has_executable_segment);
    EXPECT_FALSE(file->file_offset_to_vaddr(UINT64_MAX / 2).has_value());
    // A function's vaddr maps to a file offset whose bytes nm's address names.
    const uint64_t alpha = nm_addresses(path(name)).at("bpfprof_alpha");
    const auto offset = file->vaddr_to_file_offset(alpha);
    ASSERT_TRUE(offset.has_value());
    EXPECT_EQ(file->file_offset_to_vaddr(*offset), alpha);
  }
}

TEST_F(CompiledProgramsTest, TruncatedAndCorruptedFilesDoNotCrash) {
  const std::string original = read_file(path("pie"));
  ASSERT_GT(original.size(), 4096u);

  write_file(path("truncated100"), std::string_view(original).substr(0, 100));
  std::string error;
  EXPECT_EQ(ElfFile::open(path("truncated100"), &error), nullptr);
  EXPECT_FALSE(error.empty());
  EXPECT_EQ(error.find('\n'), std::string::npos);

  // Other cut points may open (headers intact) or fail, but never crash.
  for (size_t length : {size_t{1}, size_t{4}, size_t{52}, size_t{64}, size_t{65}, size_t{1000},
                        size_t{4096}, original.size() / 2, original.size() - 1}) {
    write_file(path("truncated"), std::string_view(original).substr(0, length));
    auto file = ElfFile::open(path("truncated"), &error);
    if (file) {
      file->lookup(0x1139);
      file->build_id_hex();
      file->file_offset_to_vaddr(0x1000);
    }
  }

  // Random byte corruption, deterministic seed.
  std::mt19937 random(1234);
  for (int round = 0; round < 300; ++round) {
    std::string corrupted = original;
    const int flips = 1 + static_cast<int>(random() % 16);
    for (int i = 0; i < flips; ++i) {
      // Half the time hit the headers, where corruption matters most.
      const size_t limit =
          (random() % 2) ? std::min<size_t>(corrupted.size(), 512) : corrupted.size();
      corrupted[random() % limit] = static_cast<char>(random());
    }
    write_file(path("corrupted"), corrupted);
    auto file = ElfFile::open(path("corrupted"), &error);
    if (file) {
      for (const Symbol& symbol : file->symbols()) file->lookup(symbol.address);
      file->build_id_hex();
    }
  }
}

TEST(ElfFileTest, LibcUsesDynsymAndResolvesExports) {
  if (!fs::exists(kLibcPath)) GTEST_SKIP() << kLibcPath << " not present";
  std::string error;
  auto libc = ElfFile::open(kLibcPath, &error);
  ASSERT_NE(libc, nullptr) << error;
  EXPECT_EQ(libc->symbol_source(), "dynsym");
  EXPECT_EQ(libc->base_vaddr(), 0u);
  EXPECT_TRUE(libc->is_elf_type_dyn());
  EXPECT_EQ(libc->architecture(), "x86_64");
  EXPECT_EQ(libc->build_id_hex(), readelf_build_id(kLibcPath));
  EXPECT_EQ(libc->build_id_hex().size(), 40u);

  const auto nm = nm_addresses(kLibcPath, /*dynamic=*/true);
  for (const std::string name : {"malloc", "qsort", "free", "memcpy"}) {
    ASSERT_TRUE(nm.count(name)) << name;
    const Symbol* symbol = libc->lookup(nm.at(name));
    ASSERT_NE(symbol, nullptr) << name;
    EXPECT_EQ(symbol->address, nm.at(name));
    if (name != "memcpy") {  // memcpy is an IFUNC; its resolver may carry another name
      EXPECT_EQ(symbol->name, name);
      const Symbol* inside = libc->lookup(nm.at(name) + 1);
      ASSERT_NE(inside, nullptr);
      EXPECT_EQ(inside->name, name);
    }
  }
}

TEST(ElfFileTest, LibcBuildIdOnThisMachine) {
  if (!fs::exists(kLibcPath)) GTEST_SKIP() << kLibcPath << " not present";
  auto libc = ElfFile::open(kLibcPath, nullptr);
  ASSERT_NE(libc, nullptr);
  const std::string expected = "93ac61ec5a8eb1396f9fbd350e3169a558528a40";
  if (readelf_build_id(kLibcPath) != expected) GTEST_SKIP() << "libc was updated";
  EXPECT_EQ(libc->build_id_hex(), expected);
}

// Debian's separate debug file for libc (package libc6-dbg), found by build id: it has a
// full .symtab but no code bytes (its PT_LOADs have p_filesz 0).
TEST(ElfFileTest, LibcDebugFileHasSymtab) {
  if (!fs::exists(kLibcPath)) GTEST_SKIP() << kLibcPath << " not present";
  auto libc = ElfFile::open(kLibcPath, nullptr);
  ASSERT_NE(libc, nullptr);
  const std::string id = libc->build_id_hex();
  ASSERT_EQ(id.size(), 40u);
  const std::string debug_path =
      "/usr/lib/debug/.build-id/" + id.substr(0, 2) + "/" + id.substr(2) + ".debug";
  if (!fs::exists(debug_path)) GTEST_SKIP() << debug_path << " not present";

  std::string error;
  auto debug = ElfFile::open(debug_path, &error);
  ASSERT_NE(debug, nullptr) << error;
  EXPECT_EQ(debug->symbol_source(), "symtab");
  EXPECT_EQ(debug->build_id_hex(), id);
  EXPECT_GT(debug->symbols().size(), libc->symbols().size());
  const auto nm = nm_addresses(kLibcPath, /*dynamic=*/true);
  for (const std::string name : {"malloc", "free"}) {  // each has several local aliases
    const Symbol* symbol = debug->lookup(nm.at(name) + 1);
    ASSERT_NE(symbol, nullptr) << name;
    EXPECT_EQ(symbol->name, name);
  }
}

TEST(ElfFileTest, OwnExecutableHasSymtab) {
  std::string error;
  auto self = ElfFile::open("/proc/self/exe", &error);
  ASSERT_NE(self, nullptr) << error;
  EXPECT_EQ(self->symbol_source(), "symtab");
  EXPECT_FALSE(self->symbols().empty());
}

TEST(ElfFileTest, BadFilesGiveOneLineErrors) {
  char directory_template[] = "/tmp/bpfprof_elf_bad_XXXXXX";
  ASSERT_NE(mkdtemp(directory_template), nullptr);
  const fs::path directory = directory_template;
  write_file(directory / "empty", "");
  write_file(directory / "text", "hello, this is not an ELF file\n");
  write_file(directory / "magic_only",
             "\x7f"
             "ELF");
  write_file(directory / "magic_garbage", std::string("\x7f"
                                                      "ELF\x02\x01\x01",
                                                      7) +
                                              std::string(200, '\xff'));
  for (const fs::path& path :
       {directory / "empty", directory / "text", directory / "magic_only",
        directory / "magic_garbage", directory / "does_not_exist", directory}) {
    std::string error;
    EXPECT_EQ(ElfFile::open(path.string(), &error), nullptr) << path;
    EXPECT_FALSE(error.empty()) << path;
    EXPECT_EQ(error.find('\n'), std::string::npos) << error;
    EXPECT_NE(error.find(path.string()), std::string::npos) << error;
    EXPECT_EQ(ElfFile::open(path.string(), nullptr), nullptr);  // error pointer optional
  }
  fs::remove_all(directory);
}

TEST(ElfCacheTest, OpensEachFileOnceUnderAnyPath) {
  if (!fs::exists(kLibcPath)) GTEST_SKIP() << kLibcPath << " not present";
  ElfCache cache;
  auto first = cache.get(kLibcPath);
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(cache.get(kLibcPath), first);
  // Same file through the process-root view (dev/inode identity).
  EXPECT_EQ(cache.get(std::string("/proc/self/root") + kLibcPath), first);
  EXPECT_EQ(cache.open_attempts(), 1u);
  EXPECT_EQ(cache.path_count(), 2u);
}

TEST(ElfCacheTest, RemembersFailures) {
  char directory_template[] = "/tmp/bpfprof_cache_XXXXXX";
  ASSERT_NE(mkdtemp(directory_template), nullptr);
  const fs::path bad = fs::path(directory_template) / "bad";
  write_file(bad, "not elf");
  ElfCache cache;
  std::string error;
  EXPECT_EQ(cache.get(bad.string(), &error), nullptr);
  EXPECT_FALSE(error.empty());
  error.clear();
  EXPECT_EQ(cache.get(bad.string(), &error), nullptr);
  EXPECT_FALSE(error.empty());
  EXPECT_EQ(cache.open_attempts(), 1u);

  EXPECT_EQ(cache.get("/nonexistent/bpfprof", &error), nullptr);
  EXPECT_NE(error.find("/nonexistent/bpfprof"), std::string::npos);
  EXPECT_EQ(cache.get("/nonexistent/bpfprof"), nullptr);
  EXPECT_EQ(cache.open_attempts(), 1u);  // stat failed: nothing to open
  fs::remove_all(directory_template);
}

}  // namespace
}  // namespace bpfprof
