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
