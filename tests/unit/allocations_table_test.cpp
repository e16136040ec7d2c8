// record --allocations' rows: a sampled block's weight, the blocks still held at the end
// (frees matched by address across a process's threads), and the balanced nativeAllocations
// table the front end matches frees in.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fcntl.h>

#include <cmath>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "symbols/elf/elf_file.h"
#include "symbols/util/unique_handle.h"
#include "tests/unit/test_commands.h"
#include "userspace/capture/allocator_probe_sites.h"
#include "userspace/model/session_model.h"
#include "userspace/output/allocations_table.h"
#include "userspace/output/json_writer.h"
#include "userspace/output/output_file.h"

namespace bpfprof {
namespace {

MonotonicNs ms(uint64_t v) { return MonotonicNs{v * 1000000}; }

TEST(SampledBlockWeight, SmallBlocksStandForTheIntervalLargeOnesForThemselves) {
  constexpr uint64_t kPeriod = 512 * 1024;
  // Sampled with chance about 16/512K: each stands for about the interval.
  EXPECT_NEAR(sampled_block_weight(16, kPeriod), kPeriod, 16);
  // Sampled almost surely: itself.
  EXPECT_EQ(sampled_block_weight(64 << 20, kPeriod), int64_t{64} << 20);
  // In between: chance 1 - e^-1.
  EXPECT_NEAR(sampled_block_weight(kPeriod, kPeriod), kPeriod / (1 - 1 / std::exp(1.0)), 1);
  EXPECT_EQ(sampled_block_weight(100, 0), 100);  // not sampled: the bytes
}

TEST(BlocksHeld, AFreeOnAnotherThreadOfTheProcessEndsTheBlock) {
  const std::vector<ThreadAllocation> main_thread = {
      {ms(1), 0, 100, 0x1000},  // freed by the worker
      {ms(2), 0, 200, 0x2000},  // held
      {ms(5), 0, 300, 0x1000},  // the freed address again, held
      {ms(6), 0, 4096, 0},      // a page fault's row: no block
  };
  const std::vector<ThreadAllocation> worker = {{ms(3), 0, -100, 0x1000}};
  const std::vector<ThreadAllocation> other_process = {{ms(4), 0, -200, 0x2000}};
  const auto held =
      blocks_held({{Pid{7}, &main_thread}, {Pid{7}, &worker}, {Pid{8}, &other_process}});
  ASSERT_EQ(held.size(), 3u);
  EXPECT_EQ(held[0], (std::vector<bool>{false, true, true, false}));
  EXPECT_EQ(held[1], (std::vector<bool>{false}));
  EXPECT_EQ(held[2], (std::vector<bool>{false}));
}

nlohmann::json allocations_json(const AllocationsTable& table, Tid tid) {
  StringSink sink;
  {
    JsonWriter w(sink);
    w.begin_object();
    table.write_json(w, tid);
    w.end_object();
    w.flush();
  }
  return nlohmann::json::parse(sink.take())["nativeAllocations"];
}

TEST(AllocationsTable, BlocksAreTheBalancedFormWithAddressesAndTheThread) {
  const std::vector<ThreadAllocation> rows = {{ms(1), 0, 4096, 0x7f0000001000},
                                              {ms(2), 0, -4096, 0x7f0000001000}};
  auto stack_of = std::make_shared<const std::vector<StackIndex>>(1, StackIndex{3});
  const nlohmann::json j = allocations_json(AllocationsTable(rows, stack_of, ms(0)), Tid{42});
  EXPECT_EQ(j["weight"], nlohmann::json({4096, -4096}));
  EXPECT_EQ(j["memoryAddress"], nlohmann::json({0x7f0000001000, 0x7f0000001000}));
  EXPECT_EQ(j["threadId"], nlohmann::json({42, 42}));
  EXPECT_EQ(j["stack"], nlohmann::json({3, 3}));
  EXPECT_EQ(j["length"], 2);
}

TEST(AllocationsTable, PageFaultsAreTheUnbalancedForm) {
  const std::vector<ThreadAllocation> rows = {{ms(1), 0, 262144, 0}};
  auto stack_of = std::make_shared<const std::vector<StackIndex>>(1, StackIndex{0});
  const nlohmann::json j = allocations_json(AllocationsTable(rows, stack_of, ms(0)), Tid{42});
  EXPECT_EQ(j["weight"], nlohmann::json({262144}));
  EXPECT_FALSE(j.contains("memoryAddress"));
  EXPECT_FALSE(j.contains("threadId"));
}

// glibc 2.36's free: test rdi,rdi; je rel32; push rbp. The probe goes on the push.
TEST(AllocatorProbeSites, FreesProbeGoesPastItsNullCheckOntoAPush) {
  const uint8_t free_236[] = {0x48, 0x85, 0xff, 0x0f, 0x84, 0xbf, 0, 0, 0, 0x55, 0x48, 0x8d};
  EXPECT_EQ(offset_past_null_check(free_236), 9u);
  const uint8_t short_je[] = {0x48, 0x85, 0xff, 0x74, 0x10, 0x41, 0x54};
  EXPECT_EQ(offset_past_null_check(short_je), 5u);
  // Anything else stays at the function's start: its first instruction is probed.
  const uint8_t no_check[] = {0x41, 0x54, 0x55, 0x53};
  EXPECT_EQ(offset_past_null_check(no_check), 0u);
  const uint8_t not_a_push[] = {0x48, 0x85, 0xff, 0x74, 0x10, 0x48, 0x8b, 0x47};
  EXPECT_EQ(offset_past_null_check(not_a_push), 0u);
  const uint8_t cut[] = {0x48, 0x85, 0xff, 0x0f, 0x84};
  EXPECT_EQ(offset_past_null_check(cut), 0u);
  EXPECT_EQ(offset_past_null_check({}), 0u);
}

// glibc's aligned_alloc is memalign (one address, two names): it is probed once.
TEST(AllocatorProbeSites, EachFunctionIsProbedOnceWhateverItsNames) {
  const std::string libc = testing_helpers::own_libc();
  ASSERT_FALSE(libc.empty());
  const std::vector<std::string> names = {"malloc", "memalign", "aligned_alloc", "free",
                                          "no_such_function"};
  const std::vector<std::string> kept = functions_at_distinct_addresses(libc, names);
  const UniqueFd fd(open(libc.c_str(), O_RDONLY | O_CLOEXEC));
  const auto symbols = read_dynamic_symbols(fd.get(), names);
  ASSERT_TRUE(symbols.contains("memalign") && symbols.contains("aligned_alloc"));
  const bool aliases = symbols.at("memalign").address == symbols.at("aligned_alloc").address;
  std::vector<std::string> expected = {"malloc", "memalign", "free"};
  if (!aliases) expected.insert(expected.begin() + 2, "aligned_alloc");
  EXPECT_EQ(kept, expected);
}

}  // namespace
}  // namespace bpfprof
