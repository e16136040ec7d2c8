// The minimal BTF's cache entry (userspace/capture/core_btf_cache.h): what is stored is read
// back for the same boot and objects, and an entry that fails any check is not used; the
// objects are named by bpfprof's build-id.
#include "userspace/capture/core_btf_cache.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "symbols/elf/elf_file.h"
#include "symbols/util/text.h"
#include "symbols/util/unique_handle.h"

namespace bpfprof {
namespace {

const std::string kCoreBtfTestObjects = "0123abcd";
const std::string kCoreBtfOtherObjects = "0123abce";

CoreBtf core_btf_sample() {
  return CoreBtf{std::string("\x9f\xeb\x01\x00 some BTF bytes", 19), {7, 0, 42}};
}

class CoreBtfCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    directory_ = ::testing::TempDir() + "core_btf_cache_" + std::to_string(getpid());
    std::filesystem::remove_all(directory_);
  }
  void TearDown() override { std::filesystem::remove_all(directory_); }
  std::string directory_;
};

TEST(CoreBtfFormat, ARoundTripKeepsTheIdsAndTheBtf) {
  const std::optional<CoreBtf> parsed = parse_core_btf(serialize_core_btf(core_btf_sample()), 3);
  ASSERT_TRUE(parsed);
  EXPECT_EQ(parsed->btf, core_btf_sample().btf);
  EXPECT_EQ(parsed->tracepoint_ids, core_btf_sample().tracepoint_ids);
}

TEST(CoreBtfFormat, AnyChangedByteOrAnotherCountIsRefused) {
  const std::string bytes = serialize_core_btf(core_btf_sample());
  for (size_t i = 0; i < bytes.size(); ++i) {
    std::string changed = bytes;
    changed[i] = static_cast<char>(changed[i] ^ 0x10);
    EXPECT_FALSE(parse_core_btf(changed, 3)) << "byte " << i;
  }
  EXPECT_FALSE(parse_core_btf(bytes, 2));
  EXPECT_FALSE(parse_core_btf(bytes.substr(0, bytes.size() - 1), 3));
  EXPECT_FALSE(parse_core_btf(bytes + "x", 3));
  EXPECT_FALSE(parse_core_btf("", 3));
}

TEST_F(CoreBtfCacheTest, WhatIsStoredIsReadForTheSameObjectsOnly) {
  const CoreBtfCache cache(directory_, kCoreBtfTestObjects);
  EXPECT_FALSE(cache.read(3));
  ASSERT_TRUE(cache.store(core_btf_sample()));
  const std::optional<CoreBtf> read = cache.read(3);
  ASSERT_TRUE(read);
  EXPECT_EQ(read->btf, core_btf_sample().btf);
  EXPECT_FALSE(CoreBtfCache(directory_, kCoreBtfOtherObjects).read(3));
  EXPECT_FALSE(cache.read(4));
  struct stat st;
  ASSERT_EQ(::stat(cache.path().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);
}

TEST_F(CoreBtfCacheTest, AnotherBootsEntriesAreRemovedWhenOneIsStored) {
  std::filesystem::create_directories(directory_);
  const std::string old_boot =
      directory_ + "/core-btf-00000000000000000000000000000000-12345678.btf";
  const std::string unrelated = directory_ + "/0123abcd.tbl";
  std::ofstream(old_boot) << "old";
  std::ofstream(unrelated) << "a table";
  const CoreBtfCache cache(directory_, kCoreBtfTestObjects);
  ASSERT_TRUE(cache.store(core_btf_sample()));
  EXPECT_FALSE(std::filesystem::exists(old_boot));
  EXPECT_TRUE(std::filesystem::exists(unrelated));
  EXPECT_TRUE(std::filesystem::exists(cache.path()));
}

TEST_F(CoreBtfCacheTest, ACorruptEntryIsNotUsedAndIsReplaced) {
  const CoreBtfCache cache(directory_, kCoreBtfTestObjects);
  ASSERT_TRUE(cache.store(core_btf_sample()));
  std::ofstream(cache.path(), std::ios::binary | std::ios::trunc) << "BPFPCBTF garbage";
  EXPECT_FALSE(cache.read(3));
  ASSERT_TRUE(cache.store(core_btf_sample()));
  EXPECT_TRUE(cache.read(3));
}

// The entry's name comes from the program's build-id (the unit tests are linked with one, as
// bpfprof is), the same whatever the objects, not from a CRC of their bytes.
TEST(CoreBtfKey, IsTheProgramsOwnBuildIdWhateverTheObjects) {
  const UniqueFd self(open("/proc/self/exe", O_RDONLY | O_CLOEXEC));
  ASSERT_TRUE(self);
  const std::vector<uint8_t> build_id = read_elf_build_id(self.get());
  ASSERT_FALSE(build_id.empty()) << "the unit tests are linked with a build-id";
  const std::vector<uint8_t> one = {1, 2, 3, 4}, other = {1, 2, 3, 5};
  EXPECT_EQ(bpf_objects_key({one}), hex_string(build_id));
  EXPECT_EQ(bpf_objects_key({other}), hex_string(build_id));
}

}  // namespace
}  // namespace bpfprof
