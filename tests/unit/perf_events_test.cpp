// The side band's ring reading and the online-CPU list, without perf or root.
#include <gtest/gtest.h>
#include <linux/perf_event.h>

#include <cstring>

#include "userspace/capture/perf_events.h"

namespace bpfprof {
namespace {

// Writes a record of `size` bytes (header included) at `position` of a ring, wrapping.
void put_record(std::vector<uint8_t>& ring, uint64_t position, uint16_t size, uint8_t fill) {
  perf_event_header header{PERF_RECORD_MMAP2, 0, size};
  std::vector<uint8_t> bytes(size, fill);
  memcpy(bytes.data(), &header, sizeof header);
  for (size_t i = 0; i < size; ++i) ring[(position + i) % ring.size()] = bytes[i];
}

TEST(PerfRing, ReadsWholeRecordsAcrossTheWrap) {
  std::vector<uint8_t> ring(64);
  put_record(ring, 40, 16, 0xa1);  // 40..55
  put_record(ring, 56, 24, 0xb2);  // 56..79: wraps
  std::vector<uint8_t> scratch;
  std::vector<std::vector<uint8_t>> seen;
  PerfRingRead read =
      read_perf_ring(ring.data(), ring.size(), 40, 80, scratch,
                     [&](const uint8_t* r, size_t n) { seen.emplace_back(r, r + n); });
  EXPECT_EQ(read.records, 2u);
  EXPECT_FALSE(read.corrupt);
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[1].size(), 24u);
  EXPECT_EQ(seen[1].back(), 0xb2);
}

// A size below the header's, or past head, would stall the ring for good (and lose every
// later mapping of that CPU) or read garbage: the rest is skipped and said to be corrupt.
TEST(PerfRing, ACorruptRecordEndsTheReadAndIsReported) {
  std::vector<uint8_t> ring(64);
  put_record(ring, 0, 16, 1);
  put_record(ring, 16, 4, 2);  // smaller than a header
  std::vector<uint8_t> scratch;
  size_t calls = 0;
  PerfRingRead read = read_perf_ring(ring.data(), ring.size(), 0, 40, scratch,
                                     [&](const uint8_t*, size_t) { ++calls; });
  EXPECT_EQ(read.records, 1u);
  EXPECT_EQ(calls, 1u);
  EXPECT_TRUE(read.corrupt);

  put_record(ring, 16, 48, 3);  // reaches past head (40)
  read = read_perf_ring(ring.data(), ring.size(), 0, 40, scratch, [&](const uint8_t*, size_t) {});
  EXPECT_EQ(read.records, 1u);
  EXPECT_TRUE(read.corrupt);
}

// An MMAP2 record as the kernel writes it: header, body, the name padded to 8 bytes, then
// sample_id_all's {pid, tid, time}.
std::vector<uint8_t> mmap2_record(uint16_t misc, const std::string& name, uint64_t time) {
  std::vector<uint8_t> body(8 + 3 * 8 + 24 + 8);
  uint32_t ids[2] = {100, 101};
  uint64_t range[3] = {0x7f0000001000, 0x5000, 0x2000};
  memcpy(body.data(), ids, 8);
  memcpy(body.data() + 8, range, 24);
  if (misc & PERF_RECORD_MISC_MMAP_BUILD_ID) {
    body[32] = 20;  // build_id_size
    for (int i = 0; i < 20; ++i) body[36 + i] = static_cast<uint8_t>(0xa0 + i);
  } else {
    uint32_t dev[2] = {8, 1};
    uint64_t inode = 4242;
    memcpy(body.data() + 32, dev, 8);
    memcpy(body.data() + 40, &inode, 8);
  }
  std::vector<uint8_t> name_bytes(name.begin(), name.end());
  name_bytes.resize((name.size() / 8 + 1) * 8, 0);
  const uint64_t trailer[2] = {100 | (101ull << 32), time};
  perf_event_header header{PERF_RECORD_MMAP2, misc,
                           static_cast<uint16_t>(sizeof(perf_event_header) + body.size() +
                                                 name_bytes.size() + sizeof trailer)};
  std::vector<uint8_t> record(header.size);
  uint8_t* p = record.data();
  memcpy(p, &header, sizeof header), p += sizeof header;
  memcpy(p, body.data(), body.size()), p += body.size();
  memcpy(p, name_bytes.data(), name_bytes.size()), p += name_bytes.size();
  memcpy(p, trailer, sizeof trailer);
  return record;
}

TEST(SideBand, Mmap2WithDeviceAndInode) {
  std::vector<LifecycleEvent> out;
  const auto record = mmap2_record(0, "/usr/lib/libfoo.so", 12345);
  EXPECT_EQ(decode_side_band_record(record.data(), record.size(), out), 0u);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].time.value, 12345u);
  const auto& e = std::get<MmapEvent>(out[0].payload);
  EXPECT_EQ(e.pid.value, 100);
  EXPECT_EQ(e.tid.value, 101);
  EXPECT_EQ(e.mapping.start, 0x7f0000001000u);
  EXPECT_EQ(e.mapping.length, 0x5000u);
  EXPECT_EQ(e.mapping.file_offset, 0x2000u);
  EXPECT_EQ(e.mapping.path, "/usr/lib/libfoo.so");
  EXPECT_EQ(e.mapping.dev_major, 8u);
  EXPECT_EQ(e.mapping.inode, 4242u);
  EXPECT_TRUE(e.mapping.build_id.empty());
}

TEST(SideBand, Mmap2WithBuildId) {
  std::vector<LifecycleEvent> out;
  const auto record = mmap2_record(PERF_RECORD_MISC_MMAP_BUILD_ID, "/bin/x", 7);
  decode_side_band_record(record.data(), record.size(), out);
  ASSERT_EQ(out.size(), 1u);
  const auto& e = std::get<MmapEvent>(out[0].payload);
  ASSERT_EQ(e.mapping.build_id.size(), 20u);
  EXPECT_EQ(static_cast<uint8_t>(e.mapping.build_id[0]), 0xa0);
  EXPECT_EQ(e.mapping.inode, 0u);
}

TEST(SideBand, ExecCommResetsTheAddressSpaceARenameDoesNot) {
  struct {
    perf_event_header header;
    uint32_t pid, tid;
    char comm[16];
    uint64_t sample_id[2];
  } comm{{PERF_RECORD_COMM, PERF_RECORD_MISC_COMM_EXEC, sizeof comm}, 7, 8, "sh", {0, 99}};
  std::vector<LifecycleEvent> out;
  decode_side_band_record(reinterpret_cast<const uint8_t*>(&comm), sizeof comm, out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(std::get<AddressSpaceResetEvent>(out[0].payload).pid.value, 7);
  EXPECT_EQ(out[0].time.value, 99u);
  comm.header.misc = 0;
  decode_side_band_record(reinterpret_cast<const uint8_t*>(&comm), sizeof comm, out);
  EXPECT_EQ(out.size(), 1u);
}

TEST(SideBand, LostRecordsAreCountedShortOnesSkipped) {
  struct {
    perf_event_header header;
    uint64_t id, lost;
  } lost{{PERF_RECORD_LOST, 0, sizeof lost}, 1, 17};
  std::vector<LifecycleEvent> out;
  EXPECT_EQ(decode_side_band_record(reinterpret_cast<const uint8_t*>(&lost), sizeof lost, out),
            17u);
  const auto record = mmap2_record(0, "/lib/x.so", 1);
  for (size_t cut : {size_t{0}, size_t{4}, size_t{8}, size_t{40}, record.size() - 24})
    EXPECT_EQ(decode_side_band_record(record.data(), cut, out), 0u) << cut;
  EXPECT_TRUE(out.empty());
}

TEST(CpuList, ParsesRangesAndRejectsJunk) {
  EXPECT_EQ(parse_cpu_list("0-3,5,7-8\n"), (std::vector<int>{0, 1, 2, 3, 5, 7, 8}));
  EXPECT_EQ(parse_cpu_list("0"), (std::vector<int>{0}));
  EXPECT_EQ(parse_cpu_list(""), (std::vector<int>{}));
  EXPECT_EQ(parse_cpu_list("0-x"), std::nullopt);
  EXPECT_EQ(parse_cpu_list("3-1"), std::nullopt);
  EXPECT_EQ(parse_cpu_list("1,,2"), std::nullopt);
  EXPECT_EQ(parse_cpu_list("0-99999999"), std::nullopt);
}

}  // namespace
}  // namespace bpfprof
