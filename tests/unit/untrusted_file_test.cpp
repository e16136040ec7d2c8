// The guarded open of files other users control: what is refused, what is copied, and that
// each refusal is said once.
#include "symbols/util/untrusted_file.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "symbols/dwarf/dwarf_module.h"
#include "symbols/elf/symbol_table.h"
#include "symbols/jit/perf_map.h"

namespace bpfprof {
namespace {

namespace fs = std::filesystem;

// Files of another user need root to make (chown); under CI=true, not being root fails.
#define REQUIRE_ROOT()                                                    \
  do {                                                                    \
    if (geteuid() == 0) break;                                            \
    const char* ci = getenv("CI");                                        \
    if (ci && std::string(ci) == "true") FAIL() << "needs root under CI"; \
    GTEST_SKIP() << "needs root to give files to another user";           \
  } while (0)

// A private directory, and one that every user may write to (as /tmp is: 1777).
class UntrustedFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    reset_untrusted_file_log();
    char pattern[] = "/tmp/untrusted-file-test-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
    shared_ = dir_ + "/shared";
    ASSERT_EQ(mkdir(shared_.c_str(), 0777), 0);
    ASSERT_EQ(chmod(shared_.c_str(), 01777), 0);
  }
  void TearDown() override {
    fs::remove_all(dir_);
    reset_untrusted_file_log();
  }
  std::string write(const std::string& path, const std::string& text, mode_t mode = 0644) {
    std::ofstream(path) << text;
    chmod(path.c_str(), mode);
    return path;
  }

  std::string dir_;
  std::string shared_;
};

TEST_F(UntrustedFileTest, ReadsARegularFile) {
  const std::string path = write(dir_ + "/map", "1000 10 f\n");
  EXPECT_EQ(read_untrusted(path, UntrustedKind::kPerfMap), "1000 10 f\n");
  EXPECT_TRUE(untrusted_file_refusals().empty());
}

TEST_F(UntrustedFileTest, AFifoIsRefusedWithoutBlocking) {
  const std::string path = shared_ + "/perf-1.map";
  ASSERT_EQ(mkfifo(path.c_str(), 0666), 0);
  const auto start = std::chrono::steady_clock::now();
  const UntrustedOpen opened = open_untrusted(path, UntrustedKind::kPerfMap);
  // A blocking open would never return; the bound leaves room for a starved test process.
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  EXPECT_FALSE(opened.fd.valid());
  ASSERT_TRUE(opened.refusal);
  EXPECT_EQ(opened.refusal->reason, RefusalReason::kNotRegular);
  EXPECT_EQ(opened.refusal->message, "perf map " + path + " ignored: not a regular file");
}

TEST_F(UntrustedFileTest, ADeviceIsRefused) {
  const UntrustedOpen opened = open_untrusted("/dev/zero", UntrustedKind::kPerfMap);
  ASSERT_TRUE(opened.refusal);
  EXPECT_EQ(opened.refusal->reason, RefusalReason::kNotRegular);
}

TEST_F(UntrustedFileTest, ALinkInASharedDirectoryIsNotFollowed) {
  const std::string target = write(dir_ + "/secret", "1000 10 secret_name\n");
  const std::string link = shared_ + "/perf-2.map";
  ASSERT_EQ(symlink(target.c_str(), link.c_str()), 0);
  const UntrustedOpen opened = open_untrusted(link, UntrustedKind::kPerfMap);
  EXPECT_FALSE(opened.fd.valid());
  ASSERT_TRUE(opened.refusal);
  EXPECT_EQ(opened.refusal->reason, RefusalReason::kLinkInSharedDir);
  // Outside a world-writable directory a link is a link: followed.
  const std::string own_link = dir_ + "/link";
  ASSERT_EQ(symlink(target.c_str(), own_link.c_str()), 0);
  EXPECT_TRUE(open_untrusted(own_link, UntrustedKind::kPerfMap).fd.valid());
}

TEST_F(UntrustedFileTest, AFileOverItsKindsCapIsRefusedWithoutReading) {
  const std::string path = dir_ + "/sparse";
  {
    const int fd = open(path.c_str(), O_WRONLY | O_CREAT, 0644);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(ftruncate(fd, static_cast<off_t>(untrusted_size_cap(UntrustedKind::kPerfMap) + 1)),
              0);
    close(fd);
  }
  const UntrustedOpen opened = open_untrusted(path, UntrustedKind::kPerfMap);
  ASSERT_TRUE(opened.refusal);
  EXPECT_EQ(opened.refusal->reason, RefusalReason::kTooLarge);
  EXPECT_NE(opened.refusal->message.find("over the 256 MiB"), std::string::npos)
      << opened.refusal->message;
}

TEST_F(UntrustedFileTest, APerfMapMustBeTheProcessUsersOrRoots) {
  REQUIRE_ROOT();
  const std::string path = write(shared_ + "/perf-3.map", "1000 10 false_name\n");
  ASSERT_EQ(chown(path.c_str(), 65534, 65534), 0);
  const UntrustedOpen foreign = open_untrusted(path, UntrustedKind::kPerfMap, OwnerRule{0});
  ASSERT_TRUE(foreign.refusal);
  EXPECT_EQ(foreign.refusal->reason, RefusalReason::kForeignOwner);
  EXPECT_EQ(
      foreign.refusal->message,
      "perf map " + path + " ignored: owned by uid 65534, not by the process's uid 0 or root");
  EXPECT_TRUE(open_untrusted(path, UntrustedKind::kPerfMap, OwnerRule{65534}).fd.valid());
  EXPECT_FALSE(PerfMap::load(path, 0).has_value());
  ASSERT_TRUE(PerfMap::load(path, 65534).has_value());
}

TEST_F(UntrustedFileTest, APerfMapWritableByEveryoneIsRefused) {
  const std::string path = write(shared_ + "/perf-4.map", "1000 10 f\n", 0666);
  const UntrustedOpen opened = open_untrusted(path, UntrustedKind::kPerfMap, OwnerRule{0});
  ASSERT_TRUE(opened.refusal);
  EXPECT_EQ(opened.refusal->reason, RefusalReason::kWritableByOthers);
}

TEST_F(UntrustedFileTest, EachRefusalIsSaidOnceButCountedEachTime) {
  const std::string path = shared_ + "/perf-5.map";
  ASSERT_EQ(mkfifo(path.c_str(), 0666), 0);
  for (int i = 0; i < 3; ++i) open_untrusted(path, UntrustedKind::kPerfMap);
  EXPECT_EQ(untrusted_file_refusals().size(), 1u);
  EXPECT_EQ(untrusted_file_refusal_count(), 3u);
}

// A binary its owner (not root) may still truncate is read from a sealed copy: a mapping of
// the copy cannot fault when the original shrinks, and the copy does not change.
TEST_F(UntrustedFileTest, AUsersBinaryIsReadFromASealedCopy) {
  REQUIRE_ROOT();
  const std::string path = write(dir_ + "/binary", std::string(8192, 'x'));
  ASSERT_EQ(chown(path.c_str(), 65534, 65534), 0);
  UntrustedOpen opened = open_untrusted(path, UntrustedKind::kBinary);
  ASSERT_TRUE(opened.fd.valid());
  EXPECT_TRUE(opened.copied);
  EXPECT_EQ(untrusted_copy_bytes(), 8192u);
  ASSERT_EQ(truncate(path.c_str(), 0), 0);
  struct stat st {};
  ASSERT_EQ(fstat(opened.fd.get(), &st), 0);
  EXPECT_EQ(st.st_size, 8192);
  EXPECT_LT(ftruncate(opened.fd.get(), 0), 0);
  // Opening the copy again (as /proc/self/fd/N) copies nothing more.
  const UntrustedOpen again =
      open_untrusted("/proc/self/fd/" + std::to_string(opened.fd.get()), UntrustedKind::kBinary);
  ASSERT_TRUE(again.fd.valid());
  EXPECT_FALSE(again.copied);
  EXPECT_EQ(untrusted_copy_bytes(), 8192u);
}

TEST_F(UntrustedFileTest, ARootOwnedBinaryIsReadInPlace) {
  REQUIRE_ROOT();
  const std::string path = write(dir_ + "/binary", std::string(100, 'x'), 0755);
  const UntrustedOpen opened = open_untrusted(path, UntrustedKind::kBinary);
  ASSERT_TRUE(opened.fd.valid());
  EXPECT_FALSE(opened.copied);
  EXPECT_FALSE(open_untrusted(path, UntrustedKind::kBinary, std::nullopt, Copying::kNever).copied);
}

TEST_F(UntrustedFileTest, LinksInsideAProcessRootStayInsideIt) {
  // A "container" whose /lib/libx.so is an absolute link to /secret: inside the root, that
  // is <root>/secret, never the host's file.
  const std::string root = dir_ + "/root";
  fs::create_directories(root + "/lib");
  write(root + "/secret", "inside");
  write(dir_ + "/secret", "host");
  ASSERT_EQ(symlink((dir_ + "/secret").c_str(), (root + "/lib/host.so").c_str()), 0);
  ASSERT_EQ(symlink("/secret", (root + "/lib/libx.so").c_str()), 0);
  UntrustedOpen inside = open_untrusted_in_root(root, "/lib/libx.so", UntrustedKind::kBinary);
  ASSERT_TRUE(inside.fd.valid());
  char text[16] = {};
  EXPECT_EQ(pread(inside.fd.get(), text, sizeof text, 0), 6);
  EXPECT_STREQ(text, "inside");
  // The link to the host's path resolves inside the root, where nothing is.
  EXPECT_FALSE(open_untrusted_in_root(root, "/lib/host.so", UntrustedKind::kBinary).fd.valid());
}

TEST(ProcessEffectiveUid, OfThisProcess) {
  EXPECT_EQ(process_effective_uid(getpid()), geteuid());
  EXPECT_FALSE(process_effective_uid(-5).has_value());
}

}  // namespace
}  // namespace bpfprof

namespace bpfprof {
namespace {

// A crafted symbol table that points every entry at one huge name cannot make the reader
// hold that name once per entry.
TEST(SymbolNameBudget, CutsLongNamesAndStopsAtItsLimit) {
  const std::string huge(1 << 20, 'n');
  SymbolNameBudget names(3 * SymbolNameBudget::kMaxNameBytes);
  for (int i = 0; i < 3; ++i) {
    const std::optional<std::string_view> name = names.take(huge.c_str());
    ASSERT_TRUE(name);
    EXPECT_EQ(name->size(), SymbolNameBudget::kMaxNameBytes);
  }
  EXPECT_FALSE(names.take(huge.c_str()));
  EXPECT_EQ(names.take(nullptr), std::string_view());
}

}  // namespace
}  // namespace bpfprof

namespace bpfprof {
namespace {

// libdwfl decompresses a file that is not ELF (a bomb any user can map executable) and then
// closes the descriptor itself: it gets ELF files only.
TEST(ElfDescriptorForLibdwfl, OnlyElfFilesReachLibdwfl) {
  const std::string elf = std::string(TEST_FIXTURE_DIR) + "/busy";
  char pattern[] = "/tmp/elf-for-libdwfl-XXXXXX";
  ASSERT_NE(mkdtemp(pattern), nullptr);
  const std::string compressed = std::string(pattern) + "/busy.gz";
  ASSERT_EQ(std::system(("gzip -c " + elf + " > " + compressed).c_str()), 0);
  EXPECT_TRUE(elf_descriptor_for_libdwfl(elf).valid());
  EXPECT_FALSE(elf_descriptor_for_libdwfl(compressed).valid());
  EXPECT_EQ(DwarfModule::open(compressed, {}), nullptr);
  EXPECT_NE(DwarfModule::open(elf, {}), nullptr);
  // A descriptor given is duplicated: the caller's stays open.
  const int fd = ::open(elf.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  UniqueFd copy = elf_descriptor_for_libdwfl(elf, fd);
  ASSERT_TRUE(copy.valid());
  EXPECT_NE(copy.get(), fd);
  EXPECT_EQ(fcntl(fd, F_GETFD) >= 0, true);
  close(fd);
  fs::remove_all(pattern);
}

}  // namespace
}  // namespace bpfprof
