// The unwind table cache (symbols/dwarf/unwind_table_cache.h): entries round-trip, and a
// damaged, cut, other-version or out-of-date entry is rebuilt, never trusted.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "symbols/dwarf/unwind_table_cache.h"
#include "symbols/util/read_file.h"
#include "symbols/util/unique_handle.h"
#include "tests/unit/test_commands.h"
#include "tests/unit/test_helpers.h"

namespace bpfprof {
namespace {

using testing_helpers::kBigFrame;
using testing_helpers::kPltLoop;

namespace fs = std::filesystem;
using testing_helpers::write_file;

class UnwindTableCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/bpfprof-unwind-cache-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    root_ = pattern;
  }
  void TearDown() override { fs::remove_all(root_); }

  CachedUnwindTable get(UnwindTableCache& cache, const std::string& path) {
    CachedUnwindTableResult result = cache.get(path);
    if (const auto* error = std::get_if<UnwindTableError>(&result)) {
      ADD_FAILURE() << path << ": " << unwind_table_error_name(*error);
      return {};
    }
    return std::get<CachedUnwindTable>(std::move(result));
  }

  // Builds once, changes the entry with `damage`, and expects the next get() to rebuild it.
  template <typename Damage>
  void expect_rebuilt_after(Damage damage) {
    UnwindTableCache cache(root_ + "/cache");
    const CachedUnwindTable built = get(cache, kPltLoop);
    ASSERT_EQ(built.source, UnwindTableSource::kBuilt) << cache.last_error();
    const fs::path entry = root_ + "/cache/" + built.key;
    std::string bytes = read_entire_file(entry).value();
    damage(bytes);
    write_file(entry, bytes);
    const CachedUnwindTable again = get(cache, kPltLoop);
    EXPECT_EQ(again.source, UnwindTableSource::kBuilt);
    EXPECT_EQ(serialize_unwind_table({}, again.compact), serialize_unwind_table({}, built.compact));
    EXPECT_EQ(get(cache, kPltLoop).source, UnwindTableSource::kCache);  // replaced for good
  }

  std::string root_;
};

TEST_F(UnwindTableCacheTest, SecondGetLoadsTheSameRowsFromTheCache) {
  UnwindTableCache cache(root_ + "/a/b");
  const mode_t saved_umask = umask(077);  // the cache is shared: 0644 whatever the umask
  const CachedUnwindTable built = get(cache, kPltLoop);
  umask(saved_umask);
  EXPECT_EQ(built.source, UnwindTableSource::kBuilt) << cache.last_error();
  EXPECT_TRUE(built.coverage.has_value());
  EXPECT_FALSE(built.rows.empty());
  UnwindTableCache next_run(root_ + "/a/b");
  const CachedUnwindTable loaded = get(next_run, kPltLoop);
  EXPECT_TRUE(loaded.from_cache());
  EXPECT_EQ(loaded.key, built.key);
  // The compact form (made once, when built, as the rows make it) and not the rows: the
  // compact form is what is read back.
  ASSERT_TRUE(built.compact && loaded.compact);
  EXPECT_TRUE(loaded.rows.empty());
  EXPECT_TRUE(loaded.has_rows());
  EXPECT_EQ(serialize_unwind_table({}, loaded.compact),
            serialize_unwind_table({}, compact_unwind_table(built.rows)));
  struct stat st;
  ASSERT_EQ(stat((root_ + "/a/b/" + built.key).c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0644u);
  ASSERT_EQ(stat((root_ + "/a").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0755u);
  // Nothing but the entry is left behind (no temporary files).
  EXPECT_EQ(std::distance(fs::directory_iterator(root_ + "/a/b"), fs::directory_iterator()), 1);
}

// The recorder reads the compact form alone: the kernel's tables are made of it.
TEST_F(UnwindTableCacheTest, TheCompactFormIsLoadedWithoutTheRows) {
  UnwindTableCache cache(root_);
  const CachedUnwindTable built = get(cache, kPltLoop);
  CachedUnwindTableResult result =
      cache.get(kPltLoop, -1, OnCacheMiss::kBuild, TableForm::kCompactFirst);
  const auto* loaded = std::get_if<CachedUnwindTable>(&result);
  ASSERT_TRUE(loaded && loaded->from_cache());
  EXPECT_TRUE(loaded->rows.empty());
  EXPECT_EQ(loaded->unread_rows, 0u);  // none in the entry
  EXPECT_TRUE(loaded->has_rows());
  ASSERT_TRUE(loaded->compact);
  EXPECT_EQ(serialize_unwind_table(built.rows, loaded->compact),
            serialize_unwind_table(built.rows, built.compact));
}

TEST_F(UnwindTableCacheTest, KeyedByBuildId) {
  UnwindTableCache cache(root_);
  EXPECT_EQ(get(cache, kPltLoop).key.size(), 40u + 4u);  // 20-byte build-id in hex, ".tbl"
}

TEST_F(UnwindTableCacheTest, AFlippedByteIsRebuilt) {
  expect_rebuilt_after([](std::string& bytes) { bytes[bytes.size() - 3] ^= 0x40; });
}

TEST_F(UnwindTableCacheTest, AFlippedHeaderByteIsRebuilt) {
  expect_rebuilt_after([](std::string& bytes) { bytes[17] ^= 0x01; });  // row_count
}

TEST_F(UnwindTableCacheTest, ATruncatedEntryIsRebuilt) {
  expect_rebuilt_after([](std::string& bytes) { bytes.resize(bytes.size() - 5); });
}

TEST_F(UnwindTableCacheTest, AnEmptyEntryIsRebuilt) {
  expect_rebuilt_after([](std::string& bytes) { bytes.clear(); });
}

TEST_F(UnwindTableCacheTest, AnotherVersionIsRebuilt) {
  expect_rebuilt_after([](std::string& bytes) { bytes[8] = char(kUnwindCacheVersion + 1); });
}

TEST_F(UnwindTableCacheTest, AnotherFileAtTheSamePathIsRebuilt) {
  // Without a build-id the key is device, inode, size and mtime.
  const std::string copy = root_ + "/program";
  const std::string strip = "objcopy --remove-section .note.gnu.build-id ";
  ASSERT_EQ(std::system((strip + kPltLoop + " " + copy).c_str()), 0);
  UnwindTableCache cache(root_ + "/cache");
  const CachedUnwindTable first = get(cache, copy);
  EXPECT_EQ(first.key.rfind("f-", 0), 0u) << first.key;
  EXPECT_EQ(get(cache, copy).source, UnwindTableSource::kCache);
  ASSERT_EQ(std::system((strip + kBigFrame + " " + copy).c_str()), 0);
  const CachedUnwindTable second = get(cache, copy);
  EXPECT_EQ(second.source, UnwindTableSource::kBuilt);
  EXPECT_NE(second.key, first.key);
  EXPECT_NE(serialize_unwind_table({}, second.compact), serialize_unwind_table({}, first.compact));
}

// Any user can build a file that claims another's build-id: its table would then replace
// the genuine file's for every later recording. Tables of files another user could have
// written are neither looked up nor stored.
TEST_F(UnwindTableCacheTest, AnotherUsersFileIsNeitherLookedUpNorStored) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to give a file to another user";
  UnwindTableCache cache(root_ + "/cache");
  const CachedUnwindTable genuine = get(cache, kPltLoop);
  ASSERT_EQ(genuine.source, UnwindTableSource::kBuilt) << cache.last_error();
  // Another user's file with the same build-id (here, a copy): its table is its own.
  const std::string forged = root_ + "/forged";
  fs::copy_file(kPltLoop, forged);
  ASSERT_EQ(chown(forged.c_str(), 65534, 65534), 0);
  const CachedUnwindTable table = get(cache, forged);
  EXPECT_EQ(table.source, UnwindTableSource::kBuiltUncached);
  EXPECT_TRUE(table.key.empty());
  // A file nobody else may write is looked up as before.
  EXPECT_EQ(get(cache, kPltLoop).source, UnwindTableSource::kCache);
}

TEST_F(UnwindTableCacheTest, AnUnwritableDirectoryStillGivesTheTable) {
  UnwindTableCache cache("/dev/null/cache");
  const CachedUnwindTable table = get(cache, kPltLoop);
  EXPECT_EQ(table.source, UnwindTableSource::kBuiltNotStored);
  EXPECT_FALSE(table.rows.empty());
  EXPECT_NE(cache.last_error().find("/dev/null"), std::string::npos);
}

TEST_F(UnwindTableCacheTest, DirectoryFromTheEnvironment) {
  setenv("BPFPROF_CACHE_DIR", root_.c_str(), 1);
  EXPECT_EQ(UnwindTableCache::default_directory(), root_);
  unsetenv("BPFPROF_CACHE_DIR");
  // The directory's name carries the format's version: a new format starts a new cache.
  EXPECT_EQ(UnwindTableCache::default_directory(),
            "/var/cache/bpfprof/unwind-v" + std::to_string(kUnwindCacheVersion));
}

TEST(UnwindTableFile, RejectsUnsortedRowsAndUnknownRules) {
  std::vector<UnwindRow> rows = {
      {0x1000, 8, 0, BPFPROF_CFA_RSP, BPFPROF_RBP_SAME, 0, BPFPROF_RBP_SAME, 0},
      {0x1004, 16, 0, BPFPROF_CFA_RSP, BPFPROF_RBP_SAME, -16, BPFPROF_RBP_AT_CFA, 0}};
  EXPECT_TRUE(parse_unwind_rows(serialize_unwind_rows(rows)).has_value());
  std::swap(rows[0], rows[1]);
  EXPECT_FALSE(parse_unwind_rows(serialize_unwind_rows(rows)).has_value());
  std::swap(rows[0], rows[1]);
  rows[1].cfa_rule = BPFPROF_CFA_LAST_RULE + 1;
  EXPECT_FALSE(parse_unwind_rows(serialize_unwind_rows(rows)).has_value());
  rows[1].cfa_rule = BPFPROF_CFA_RBX;
  EXPECT_TRUE(parse_unwind_rows(serialize_unwind_rows(rows)).has_value());
  rows[1].rbx_rule = 3;
  EXPECT_FALSE(parse_unwind_rows(serialize_unwind_rows(rows)).has_value());
  EXPECT_TRUE(parse_unwind_rows(serialize_unwind_rows({})).value().empty());
}

// The compact section is checked as the rows are: its checksum, its pages covering its
// entries in order, rising pcs within a page, rule indices in range, known rules.
TEST(UnwindTableFile, TheCompactFormIsCheckedLikeTheRows) {
  const std::vector<UnwindRow> rows = {
      {0x1000, 8, 0, BPFPROF_CFA_RSP, BPFPROF_RBP_SAME, 0, BPFPROF_RBP_SAME, 0},
      {0x1004, 16, 0, BPFPROF_CFA_RSP, BPFPROF_RBP_SAME, -16, BPFPROF_RBP_AT_CFA, 0},
      {0x21000, 8, 0, BPFPROF_CFA_RSP, BPFPROF_RBP_SAME, 0, BPFPROF_RBP_SAME, 0}};
  const CompactUnwindTable good = compact_unwind_table(rows).value();
  const auto parsed = parse_unwind_table(serialize_unwind_table(rows, good));
  ASSERT_TRUE(parsed && parsed->compact);
  EXPECT_EQ(parsed->compact->pages.size(), 3u);
  EXPECT_EQ(parsed->compact->rules.size(), 2u);
  EXPECT_EQ(serialize_unwind_table(rows, parsed->compact), serialize_unwind_table(rows, good));
  // Without one (rows of too many rules): none on load, the rows still read.
  const auto none = parse_unwind_table(serialize_unwind_table(rows, std::nullopt));
  ASSERT_TRUE(none);
  EXPECT_FALSE(none->compact);
  EXPECT_EQ(none->rows.size(), 3u);
  // A byte changed after the checksum was taken.
  std::string bytes = serialize_unwind_table(rows, good);
  bytes.back() ^= 1;
  EXPECT_FALSE(parse_unwind_table(bytes));
  // Well summed but wrong: a rule index past the rules, pcs going back, pages not covering
  // their entries, an unknown rule.
  auto broken = [&](auto change) {
    CompactUnwindTable table = good;
    change(table);
    return !parse_unwind_table(serialize_unwind_table(rows, table));
  };
  EXPECT_TRUE(broken([](CompactUnwindTable& t) { t.rows[1].rule = 7; }));
  EXPECT_TRUE(broken([](CompactUnwindTable& t) { std::swap(t.rows[0], t.rows[1]); }));
  EXPECT_TRUE(broken([](CompactUnwindTable& t) { t.pages[0].row_count += 1; }));
  EXPECT_TRUE(broken([](CompactUnwindTable& t) { t.pages.back().first_row = 0; }));
  EXPECT_TRUE(
      broken([](CompactUnwindTable& t) { t.rules[0].cfa_rule = BPFPROF_CFA_LAST_RULE + 1; }));
  EXPECT_FALSE(broken([](CompactUnwindTable&) {}));
}

std::optional<ParsedUnwindTable> read_as(const std::string& bytes, TableForm form) {
  const UniqueFd fd(memfd_create("entry", 0));
  EXPECT_EQ(write(fd.get(), bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
  return read_unwind_table(fd.get(), bytes.size(), form);
}

// Read from its file, the compact form alone is checked as a whole entry's is; the rows are
// skipped (and their damage not seen), or read where no compact form follows them.
TEST(UnwindTableFile, TheCompactFormAloneIsReadAndChecked) {
  const std::vector<UnwindRow> rows = {
      {0x1000, 8, 0, BPFPROF_CFA_RSP, BPFPROF_RBP_SAME, 0, BPFPROF_RBP_SAME, 0},
      {0x21000, 8, 0, BPFPROF_CFA_RSP, BPFPROF_RBP_SAME, 0, BPFPROF_RBP_SAME, 0}};
  const std::string bytes = serialize_unwind_rows(rows);
  const auto compact = read_as(bytes, TableForm::kCompactFirst);
  ASSERT_TRUE(compact && compact->compact);
  EXPECT_TRUE(compact->rows.empty());
  EXPECT_EQ(compact->row_count, 0u);  // the entry has its compact form, not its rows
  EXPECT_EQ(serialize_unwind_table(rows, compact->compact), bytes);
  const auto whole = read_as(bytes, TableForm::kRows);
  ASSERT_TRUE(whole && whole->compact);
  EXPECT_TRUE(whole->rows.empty());
  const std::string rows_only = serialize_unwind_table(rows, std::nullopt);
  const auto without = read_as(rows_only, TableForm::kCompactFirst);
  ASSERT_TRUE(without);
  EXPECT_FALSE(without->compact);
  EXPECT_EQ(without->rows.size(), 2u);
  std::string damaged = rows_only;
  damaged[sizeof(UnwindCacheHeader) + 1] ^= 1;  // a row's byte
  EXPECT_FALSE(read_as(damaged, TableForm::kCompactFirst));
  EXPECT_FALSE(read_as(damaged, TableForm::kRows));
  // Rows and a compact form in one entry: not as written, refused.
  std::string both = rows_only.substr(0, rows_only.size() - sizeof(UnwindCacheCompactHeader));
  both += bytes.substr(sizeof(UnwindCacheHeader));
  EXPECT_FALSE(read_as(both, TableForm::kRows));
  EXPECT_FALSE(read_as(both, TableForm::kCompactFirst));
  damaged = bytes;
  damaged.back() ^= 1;  // the compact form's
  EXPECT_FALSE(read_as(damaged, TableForm::kCompactFirst));
  EXPECT_FALSE(read_as(bytes.substr(0, bytes.size() - 1), TableForm::kCompactFirst));
  EXPECT_FALSE(read_as(bytes + "x", TableForm::kCompactFirst));
  EXPECT_FALSE(read_as(bytes.substr(0, 20), TableForm::kCompactFirst));
}

}  // namespace
}  // namespace bpfprof
