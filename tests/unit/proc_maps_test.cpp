#include "symbols/util/proc_maps.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>

namespace bpfprof {
namespace {

TEST(ProcMapsTest, ParsesFileBackedLine) {
  const auto entries = parse_proc_maps(
      "55d4c1e00000-55d4c1e28000 r-xp 00002000 fd:01 1837468                    "
      "/usr/bin/cat\n");
  ASSERT_EQ(entries.size(), 1u);
  const MapEntry& entry = entries[0];
  EXPECT_EQ(entry.start, 0x55d4c1e00000u);
  EXPECT_EQ(entry.end, 0x55d4c1e28000u);
  EXPECT_EQ(entry.file_offset, 0x2000u);
  EXPECT_TRUE(entry.readable);
  EXPECT_FALSE(entry.writable);
  EXPECT_TRUE(entry.executable);
  EXPECT_TRUE(entry.is_private);
  EXPECT_EQ(entry.dev_major, 0xfdu);
  EXPECT_EQ(entry.dev_minor, 0x01u);
  EXPECT_EQ(entry.inode, 1837468u);
  EXPECT_EQ(entry.path, "/usr/bin/cat");
  EXPECT_EQ(entry.kind(), MappingKind::kFile);
  EXPECT_FALSE(entry.is_deleted());
  EXPECT_TRUE(entry.contains(0x55d4c1e00000u));
  EXPECT_TRUE(entry.contains(0x55d4c1e27fffu));
  EXPECT_FALSE(entry.contains(0x55d4c1e28000u));
}

TEST(ProcMapsTest, ParsesAnonymousAndSpecialMappings) {
  const auto entries = parse_proc_maps(
      "7f0000000000-7f0000021000 rw-p 00000000 00:00 0 \n"
      "7f0000100000-7f0000200000 rw-s 00000000 00:00 0\n"
      "7ffc8a5e0000-7ffc8a601000 rw-p 00000000 00:00 0                          [stack]\n"
      "7ffc8a7f5000-7ffc8a7f7000 r-xp 00000000 00:00 0                          [vdso]\n");
  ASSERT_EQ(entries.size(), 4u);
  EXPECT_EQ(entries[0].path, "");
  EXPECT_EQ(entries[0].kind(), MappingKind::kAnonymousCode);
  EXPECT_FALSE(entries[0].executable);
  EXPECT_TRUE(entries[0].writable);
  EXPECT_EQ(entries[1].path, "");
  EXPECT_FALSE(entries[1].is_private);
  EXPECT_EQ(entries[2].path, "[stack]");
  EXPECT_EQ(entries[2].kind(), MappingKind::kAnonymousCode);
  EXPECT_EQ(entries[3].path, "[vdso]");
  EXPECT_TRUE(entries[3].executable);
  EXPECT_EQ(entries[3].kind(), MappingKind::kVdso);
}

TEST(MappingKind, OnePlaceTellsFilesFromAnonymousCodeAndSpecialMappings) {
  EXPECT_EQ(classify_mapping("/usr/lib/x86_64-linux-gnu/libc.so.6"), MappingKind::kFile);
  EXPECT_EQ(classify_mapping("/tmp/jit code.so (deleted)"), MappingKind::kFile);
  EXPECT_EQ(classify_mapping(""), MappingKind::kAnonymousCode);
  EXPECT_EQ(classify_mapping("//anon"), MappingKind::kAnonymousCode);
  EXPECT_EQ(classify_mapping("[anon:v8 code]"), MappingKind::kAnonymousCode);
  EXPECT_EQ(classify_mapping("/memfd:jit (deleted)"), MappingKind::kAnonymousCode);
  // Shared anonymous memory (opcache's JIT buffer, SysV segments): not a file to pin or read.
  EXPECT_EQ(classify_mapping("/dev/zero (deleted)"), MappingKind::kAnonymousCode);
  EXPECT_EQ(classify_mapping("/SYSV00000000 (deleted)"), MappingKind::kAnonymousCode);
  EXPECT_EQ(classify_mapping("/dev/zero"), MappingKind::kFile);
  EXPECT_EQ(classify_mapping("[heap]"), MappingKind::kAnonymousCode);
  EXPECT_EQ(classify_mapping("[vdso]"), MappingKind::kVdso);
  EXPECT_EQ(classify_mapping("[vvar]"), MappingKind::kOtherSpecial);
  EXPECT_EQ(classify_mapping("[vsyscall]"), MappingKind::kOtherSpecial);
}

TEST(ProcMapsTest, KeepsSpacesAndDeletedSuffixInPath) {
  const auto entries = parse_proc_maps(
      "400000-401000 r-xp 00000000 08:02 42      /opt/my app/bin  x\n"
      "401000-402000 r-xp 00001000 08:02 43      /tmp/jit code.so (deleted)\n");
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries[0].path, "/opt/my app/bin  x");
  EXPECT_FALSE(entries[0].is_deleted());
  EXPECT_EQ(entries[1].path, "/tmp/jit code.so (deleted)");
  EXPECT_TRUE(entries[1].is_deleted());
  EXPECT_EQ(entries[1].path_without_deleted_suffix(), "/tmp/jit code.so");
  EXPECT_EQ(entries[0].path_without_deleted_suffix(), entries[0].path);
}

TEST(ProcMapsTest, HandlesHugeAddressesAndOffsets) {
  const auto entries = parse_proc_maps(
      "ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0                  [vsyscall]\n"
      "7f0000000000-7f0000001000 r--s fffffffffffff000 103:0a 18446744073709551615 /dev/x\n");
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries[0].start, 0xffffffffff600000u);
  EXPECT_EQ(entries[0].end, 0xffffffffff601000u);
  EXPECT_FALSE(entries[0].readable);
  EXPECT_TRUE(entries[0].executable);
  EXPECT_EQ(entries[1].file_offset, 0xfffffffffffff000u);
  EXPECT_EQ(entries[1].dev_major, 0x103u);
  EXPECT_EQ(entries[1].dev_minor, 0x0au);
  EXPECT_EQ(entries[1].inode, UINT64_MAX);
}

TEST(ProcMapsTest, SkipsMalformedLines) {
  const auto entries = parse_proc_maps(
      "\n"
      "garbage\n"
      "400000-401000\n"                                           // truncated
      "400000 401000 r-xp 00000000 08:02 42 /a\n"                 // no dash
      "400000-401000 rwzp 00000000 08:02 42 /a\n"                 // bad permission
      "400000-401000 r-xq 00000000 08:02 42 /a\n"                 // bad sharing flag
      "400000-401000 r-x 00000000 08:02 42 /a\n"                  // short permissions
      "40000g-401000 r-xp 00000000 08:02 42 /a\n"                 // non-hex
      "401000-400000 r-xp 00000000 08:02 42 /a\n"                 // start > end
      "400000-400000 r-xp 00000000 08:02 42 /a\n"                 // empty range
      "1ffffffffffffffff-2ffffffffffffffff r-xp 0 08:02 42 /a\n"  // overflows 64 bits
      "400000-401000 r-xp 00000000 0802 42 /a\n"                  // no dev colon
      "400000-401000 r-xp 00000000 08:02 /a\n"                    // no inode
      "400000-401000 r-xp 00000000 08:02 42x /a\n"                // junk after inode
      "400000-401000 r-xp 00000000 08:02 -42 /a\n"                // negative inode
      "400000-401000 r-xp 00000000 1ffffffff:02 42 /a\n"          // dev major > 32 bits
      "500000-501000 r-xp 00000000 08:02 42 /good\n"
      "-\n"
      "\xff\xfe\n"
      "600000-601000 r--p 00000000 08:02 43 /good2");  // no trailing newline
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries[0].path, "/good");
  EXPECT_EQ(entries[0].start, 0x500000u);
  EXPECT_EQ(entries[1].path, "/good2");
}

TEST(ProcMapsTest, EmptyInputGivesNoEntries) {
  EXPECT_TRUE(parse_proc_maps("").empty());
  EXPECT_TRUE(parse_proc_maps("\n\n\n").empty());
}

TEST(ProcMapsTest, ReadsOwnMaps) {
  const auto entries = read_proc_maps(getpid());
  ASSERT_TRUE(entries.has_value());
  ASSERT_FALSE(entries->empty());
  EXPECT_TRUE(std::any_of(entries->begin(), entries->end(),
                          [](const MapEntry& e) { return e.path == "[stack]"; }));
  // The code of this very function lies in an executable, file-backed mapping.
  const auto code_address = reinterpret_cast<uint64_t>(&parse_proc_maps);
  const auto code_map = std::find_if(entries->begin(), entries->end(),
                                     [&](const MapEntry& e) { return e.contains(code_address); });
  ASSERT_NE(code_map, entries->end());
  EXPECT_TRUE(code_map->executable);
  EXPECT_TRUE(code_map->kind() == MappingKind::kFile);
  EXPECT_TRUE(
      std::is_sorted(entries->begin(), entries->end(),
                     [](const MapEntry& a, const MapEntry& b) { return a.start < b.start; }));
}

TEST(ProcMapsTest, UnreadablePidGivesNullopt) {
  EXPECT_FALSE(read_proc_maps(-1).has_value());
  EXPECT_FALSE(read_proc_maps(0).has_value());
  EXPECT_FALSE(read_proc_maps(INT32_MAX).has_value());  // above pid_max
}

}  // namespace
}  // namespace bpfprof
