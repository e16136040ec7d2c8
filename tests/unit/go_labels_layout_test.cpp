// Which Go release built a binary (symbols/go/go_release.h) and where its goroutines' labels
// are (symbols/go/labels_layout.h): Go 1.19's fixtures (built by Debian's golang-go; go_cpu sets
// labels), a current esbuild release (Go 1.26, no .go.buildinfo), and code and data of other
// shapes.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <unistd.h>
#include <array>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "symbols/elf/elf_file.h"
#include "symbols/go/go_release.h"
#include "symbols/go/labels_layout.h"
#include "symbols/go/pclntab.h"
#include "tests/unit/test_helpers.h"

namespace bpfprof {
namespace {

using go::GoRelease;
using testing_helpers::go_fixture;
using testing_helpers::go_table;
using testing_helpers::kEsbuild;

TEST(GoRelease, ParsesReleasesAsGoWritesThem) {
  EXPECT_EQ(go::parse_go_release("go1.19.8"), (GoRelease{19, 8}));
  EXPECT_EQ(go::parse_go_release("go1.24"), (GoRelease{24, 0}));
  EXPECT_EQ(go::parse_go_release("go1.25rc1"), (GoRelease{25, 0}));
  EXPECT_EQ(go::parse_go_release("go1.25-20250209-RC00"), (GoRelease{25, 0}));
  EXPECT_EQ(go::parse_go_release("devel go1.26-abcdef Tue"), (GoRelease{26, 0}));
  EXPECT_FALSE(go::parse_go_release("go2"));
  EXPECT_FALSE(go::parse_go_release("go1.x"));
  EXPECT_FALSE(go::parse_go_release(""));
}

TEST(GoRelease, FromBuildinfoAndFromReadOnlyData) {
  // 1.18+'s inline form: magic, pointer size 8, flags 2, then at 32 a uvarint length.
  std::vector<uint8_t> buildinfo(32, 0);
  memcpy(buildinfo.data(), "\xff Go buildinf:", 14);
  buildinfo[14] = 8;
  buildinfo[15] = 2;
  const std::string version = "go1.21.11";
  buildinfo.push_back(static_cast<uint8_t>(version.size()));
  buildinfo.insert(buildinfo.end(), version.begin(), version.end());
  EXPECT_EQ(go::release_from_buildinfo(buildinfo), (GoRelease{21, 11}));
  buildinfo[15] = 0;  // the pointer form of 1.17 and older: not read
  EXPECT_FALSE(go::release_from_buildinfo(buildinfo));
  buildinfo[15] = 2;
  buildinfo[32] = 200;  // a length past the section
  EXPECT_FALSE(go::release_from_buildinfo(buildinfo));
  // In read-only data, the version standing alone; not a file name that holds one.
  const std::string rodata = std::string("fips140only_go1.27.go\0\0go1.26.5\0tail", 36);
  EXPECT_EQ(
      go::release_from_rodata({reinterpret_cast<const uint8_t*>(rodata.data()), rodata.size()}),
      (GoRelease{26, 5}));
  const std::string none = "vendor/golang.org/x/crypto/fips140only_go1.26.go";
  EXPECT_FALSE(
      go::release_from_rodata({reinterpret_cast<const uint8_t*>(none.data()), none.size()}));
}

TEST(GoRelease, OfTheFixturesAndOfACurrentEsbuild) {
  const std::unique_ptr<go::GoTable> fixture = go_table(go_fixture("go_cpu_stripped"));
  ASSERT_NE(fixture, nullptr);
  ASSERT_TRUE(fixture->release());
  EXPECT_EQ(fixture->release()->minor, 19u);
  if (!std::filesystem::exists(kEsbuild))
    GTEST_SKIP() << "no esbuild (npm install in tests/integration)";
  const std::unique_ptr<go::GoTable> esbuild = go_table(kEsbuild);
  ASSERT_NE(esbuild, nullptr) << kEsbuild;
  ASSERT_TRUE(esbuild->release());
  EXPECT_GE(esbuild->release()->minor, 24u);
}

// Go 1.19's runtime_setProfLabel: stack check, frame, `cmpl $0,writeBarrier`, then the store
// `mov %rax,0x168(%r14)` (and the write barrier's `add $0x168,%rdi`).
constexpr std::array<uint8_t, 77> kSetProfLabel119 = {
    0x49, 0x3b, 0x66, 0x10, 0x76, 0x36, 0x48, 0x83, 0xec, 0x08, 0x48, 0x89, 0x2c, 0x24, 0x48, 0x8d,
    0x2c, 0x24, 0x83, 0x3d, 0x17, 0xaf, 0x11, 0x00, 0x00, 0x75, 0x09, 0x49, 0x89, 0x86, 0x68, 0x01,
    0x00, 0x00, 0xeb, 0x0f, 0x4c, 0x89, 0xf7, 0x48, 0x81, 0xc7, 0x68, 0x01, 0x00, 0x00, 0xe8, 0xed,
    0x37, 0x00, 0x00, 0x48, 0x8b, 0x2c, 0x24, 0x48, 0x83, 0xc4, 0x08, 0xc3, 0x48, 0x89, 0x44, 0x24,
    0x08, 0xe8, 0x1a, 0x18, 0x00, 0x00, 0x48, 0x8b, 0x44, 0x24, 0x08, 0xeb, 0xb3};

TEST(GoLabelsLayout, TheOffsetFromTheSettersStore) {
  EXPECT_EQ(go::labels_offset_from_code(kSetProfLabel119), 0x168u);
  EXPECT_FALSE(go::labels_offset_from_code(std::span(kSetProfLabel119).first(30)));
  std::array<uint8_t, kSetProfLabel119.size()> odd = kSetProfLabel119;
  odd[30] = 0x6b;  // not 8-aligned: not a pointer field
  EXPECT_FALSE(go::labels_offset_from_code(odd));
  odd[30] = 0x68, odd[32] = 0x10;  // far past the end of a g
  EXPECT_FALSE(go::labels_offset_from_code(odd));
}

// Go 1.26's: the store goes through a copy of g (`mov %rax,0x160(%rcx)`); the write barrier
// reads the old value first, `mov 0x160(%r14),%rcx`.
constexpr std::array<uint8_t, 80> kSetProfLabel126 = {
    0x49, 0x3b, 0x66, 0x10, 0x76, 0x39, 0x55, 0x48, 0x89, 0xe5, 0x48, 0x83, 0xec, 0x08, 0x4c, 0x89,
    0x34, 0x24, 0x83, 0x3d, 0x17, 0x43, 0x21, 0x00, 0x00, 0x74, 0x13, 0x49, 0x8b, 0x8e, 0x60, 0x01,
    0x00, 0x00, 0xe8, 0x39, 0x60, 0x00, 0x00, 0x49, 0x89, 0x03, 0x49, 0x89, 0x4b, 0x08, 0x48, 0x8b,
    0x0c, 0x24, 0x48, 0x89, 0x81, 0x60, 0x01, 0x00, 0x00, 0x48, 0x83, 0xc4, 0x08, 0x5d, 0xc3, 0x48,
    0x89, 0x44, 0x24, 0x08, 0xe8, 0x97, 0x46, 0x00, 0x00, 0x48, 0x8b, 0x44, 0x24, 0x08, 0xeb, 0xb0};

TEST(GoLabelsLayout, TheOffsetFromACurrentGosWriteBarrierRead) {
  EXPECT_EQ(go::labels_offset_from_code(kSetProfLabel126), 0x160u);
  EXPECT_FALSE(go::labels_offset_from_code(std::span(kSetProfLabel126).first(27)));
}

TEST(GoLabelsLayout, TheFormFollowsTheRelease) {
  EXPECT_EQ(go::labels_layout(0x168, GoRelease{19, 8}),
            (go::LabelsLayout{0x168, go::LabelsForm::kMap}));
  EXPECT_EQ(go::labels_layout(0x160, GoRelease{23, 0}),
            (go::LabelsLayout{0x160, go::LabelsForm::kMap}));
  EXPECT_EQ(go::labels_layout(0x160, GoRelease{24, 3}),
            (go::LabelsLayout{0x160, go::LabelsForm::kSlice}));
  EXPECT_FALSE(go::labels_layout(std::nullopt, GoRelease{24, 3}));
  EXPECT_FALSE(go::labels_layout(0x160, std::nullopt));
  EXPECT_FALSE(go::labels_layout(0x160, GoRelease{16, 0}));  // before the register ABI
}

// go_cpu sets its goroutines' labels: its setter's store is at Go 1.19's g.labels (360, as its
// DWARF's runtime.g says).
TEST(GoLabelsLayout, OfTheFixture) {
  const std::string path = go_fixture("go_cpu");
  const std::unique_ptr<go::GoTable> table = go_table(path);
  ASSERT_NE(table, nullptr);
  std::optional<go::GoFunction> setter;
  for (size_t i = 0; i < table->function_count() && !setter; ++i)
    if (auto f = table->function(i); f && f->name == go::kSetProfLabel) setter = f;
  ASSERT_TRUE(setter) << "go_cpu does not set labels";
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  const std::vector<uint8_t> code = read_code_bytes(fd, setter->entry, setter->end - setter->entry);
  close(fd);
  EXPECT_EQ(go::labels_layout(go::labels_offset_from_code(code), table->release()),
            (go::LabelsLayout{360, go::LabelsForm::kMap}));
}

}  // namespace
}  // namespace bpfprof
