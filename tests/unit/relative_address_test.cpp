#include "symbols/relative_address.h"

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include "tests/unit/test_commands.h"

namespace fs = std::filesystem;

// Looked up by name in this test binary's own symbol table.
extern "C" __attribute__((noinline)) int bpfprof_relative_test_marker(int x) { return x * 5 + 1; }

namespace bpfprof {
namespace {

constexpr uint64_t kPage = 4096;

using testing_helpers::run_command;

uint64_t nm_address(const std::string& path, const std::string& wanted) {
  std::istringstream lines(run_command("nm --defined-only " + path + " 2>/dev/null"));
  std::string address, type, name;
  while (lines >> address >> type >> name) {
    if (name == wanted) return std::stoull(address, nullptr, 16);
  }
  return 0;
}

// The mapping the loader creates for `segment` when the file is loaded at `load_bias`.
MapEntry mapping_for(const LoadSegment& segment, uint64_t load_bias) {
  MapEntry map;
  map.start = load_bias + (segment.vaddr & ~(kPage - 1));
  map.end = (load_bias + segment.vaddr + segment.file_size + kPage - 1) & ~(kPage - 1);
  map.file_offset = segment.file_offset & ~(kPage - 1);
  map.readable = true;
  map.executable = segment.executable();
  map.is_private = true;
  return map;
}

const LoadSegment* executable_segment(const ElfFile& file) {
  for (const LoadSegment& segment : file.load_segments()) {
    if (segment.executable()) return &segment;
  }
  return nullptr;
}

TEST(RelativeAddressTest, FileOffsetArithmetic) {
  EXPECT_EQ(file_offset_for(0x7f0000001234, 0x7f0000001000, 0x3000), 0x3234u);
  EXPECT_EQ(file_offset_for(0x401000, 0x401000, 0x1000), 0x1000u);
  static_assert(file_offset_for(0x2010, 0x2000, 0) == 0x10);
}

TEST(RelativeAddressTest, FallsBackToFileOffsetWithoutElf) {
  MapEntry map;
  map.start = 0x7f0000000000;
  map.end = 0x7f0000010000;
  map.file_offset = 0x26000;
  EXPECT_EQ(relative_address_or_file_offset(0x7f0000000123, map, nullptr), 0x26123u);
}

class CompiledRelativeTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    char directory_template[] = "/tmp/bpfprof_relative_test_XXXXXX";
    if (mkdtemp(directory_template) == nullptr) return;
    directory_ = directory_template;
    const fs::path source = directory_ / "program.c";
    std::ofstream(source) << "__attribute__((noinline)) int bpfprof_target(int x) {\n"
                             "  return x * 7;\n}\n"
                             "int main(int argc, char** argv) { (void)argv;\n"
                             "  return bpfprof_target(argc); }\n";
    const std::string common = "cc -O0 -fno-omit-frame-pointer " + source.string();
    compiled_ = std::system((common + " -fPIE -pie -o " + path("pie")).c_str()) == 0 &&
                std::system((common + " -fno-pie -no-pie -o " + path("nopie")).c_str()) == 0;
  }
  static void TearDownTestSuite() {
    std::error_code ignored;
    if (!directory_.empty()) fs::remove_all(directory_, ignored);
  }
  void SetUp() override {
    if (!compiled_) GTEST_SKIP() << "cannot compile test programs with cc";
  }
  static std::string path(const std::string& name) { return (directory_ / name).string(); }

  static inline fs::path directory_;
  static inline bool compiled_ = false;
};

TEST_F(CompiledRelativeTest, PieRelativeAddressEqualsSymbolVaddr) {
  std::string error;
  auto file = ElfFile::open(path("pie"), &error);
  ASSERT_NE(file, nullptr) << error;
  const uint64_t target = nm_address(path("pie"), "bpfprof_target");
  ASSERT_NE(target, 0u);
  const LoadSegment* text = executable_segment(*file);
  ASSERT_NE(text, nullptr);

  const uint64_t load_bias = 0x555555554000;
  const MapEntry map = mapping_for(*text, load_bias);
  const uint64_t ip = load_bias + target + 3;
  ASSERT_TRUE(map.contains(ip));

  EXPECT_EQ(relative_address(ip, map, *file), target + 3);
  // For PIE the file-offset fallback gives the same answer.
  EXPECT_EQ(relative_address_or_file_offset(ip, map, nullptr), target + 3);
  EXPECT_EQ(relative_address_or_file_offset(ip, map, file.get()), target + 3);
  EXPECT_EQ(absolute_address(target + 3, map, *file), ip);
  const Symbol* symbol = file->lookup(vaddr_for_relative(target + 3, *file));
  ASSERT_NE(symbol, nullptr);
  EXPECT_EQ(symbol->name, "bpfprof_target");

  EXPECT_FALSE(relative_address(map.end, map, *file).has_value());
  EXPECT_FALSE(relative_address(map.start - 1, map, *file).has_value());
}

TEST_F(CompiledRelativeTest, NonPieRelativeAddressIsVaddrMinusBase) {
  std::string error;
  auto file = ElfFile::open(path("nopie"), &error);
  ASSERT_NE(file, nullptr) << error;
  ASSERT_EQ(file->base_vaddr(), 0x400000u);
  const uint64_t target = nm_address(path("nopie"), "bpfprof_target");
  ASSERT_GT(target, 0x400000u);
  const LoadSegment* text = executable_segment(*file);
  ASSERT_NE(text, nullptr);

  const MapEntry map = mapping_for(*text, /*load_bias=*/0);  // non-PIE loads at its vaddrs
  const uint64_t ip = target + 2;
  const auto relative = relative_address(ip, map, *file);
  ASSERT_TRUE(relative.has_value());
  EXPECT_EQ(*relative, target + 2 - 0x400000);
  EXPECT_EQ(absolute_address(*relative, map, *file), ip);
  const Symbol* symbol = file->lookup(vaddr_for_relative(*relative, *file));
  ASSERT_NE(symbol, nullptr);
  EXPECT_EQ(symbol->name, "bpfprof_target");
}

TEST_F(CompiledRelativeTest, SegmentWithOffsetDifferentFromVaddr) {
  // A synthetic layout where p_vaddr - p_offset != 0 (as in some linkers' data segments and
  // prelinked libraries): the file offset alone is not the relative address.
  std::string error;
  auto file = ElfFile::open(path("pie"), &error);
  ASSERT_NE(file, nullptr) << error;
  for (const LoadSegment& segment : file->load_segments()) {
    if (segment.file_size == 0 || segment.vaddr == segment.file_offset) continue;
    const uint64_t load_bias = 0x7f1234560000;
    const MapEntry map = mapping_for(segment, load_bias);
    const uint64_t ip = load_bias + segment.vaddr + segment.file_size / 2;
    EXPECT_EQ(relative_address(ip, map, *file), segment.vaddr + segment.file_size / 2);
    EXPECT_NE(relative_address_or_file_offset(ip, map, nullptr),
              segment.vaddr + segment.file_size / 2);
  }
}

// The real thing: this process's own mappings, for a function in this executable and for
// one in libc.
TEST(RelativeAddressLiveTest, ResolvesOwnAndLibcFunctions) {
  const auto maps = read_proc_maps(getpid());
  ASSERT_TRUE(maps.has_value());

  struct Case {
    uint64_t ip;
    std::string expected_name;
  };
  // libc's own qsort, not a sanitizer interceptor of the same name.
  void* libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
  ASSERT_NE(libc, nullptr);
  void* qsort_address = dlsym(libc, "qsort");
  dlclose(libc);
  ASSERT_NE(qsort_address, nullptr);
  const Case cases[] = {
      {reinterpret_cast<uint64_t>(&bpfprof_relative_test_marker) + 1,
       "bpfprof_relative_test_marker"},
      {reinterpret_cast<uint64_t>(qsort_address) + 1, "qsort"},
  };
  for (const Case& c : cases) {
    const auto map = std::find_if(maps->begin(), maps->end(),
                                  [&](const MapEntry& m) { return m.contains(c.ip); });
    ASSERT_NE(map, maps->end()) << c.expected_name;
    ASSERT_EQ(map->kind(), MappingKind::kFile) << map->path;
    std::string error;
    auto file = ElfFile::open(map->path, &error);
    ASSERT_NE(file, nullptr) << error;
    const auto relative = relative_address(c.ip, *map, *file);
    ASSERT_TRUE(relative.has_value()) << c.expected_name;
    const Symbol* symbol = file->lookup(vaddr_for_relative(*relative, *file));
    ASSERT_NE(symbol, nullptr) << c.expected_name;
    EXPECT_EQ(symbol->name, c.expected_name);
    EXPECT_EQ(absolute_address(*relative, *map, *file), c.ip);
  }
}

}  // namespace
}  // namespace bpfprof
