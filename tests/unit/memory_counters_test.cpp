// userspace/output/memory_counters.h: a process's memory samples as the profile's counter of
// category Memory, each sample the change since the one before, within the process's life.
#include "userspace/output/memory_counters.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "userspace/output/output_file.h"
#include "userspace/output/profile_builder.h"

namespace bpfprof {
namespace {

constexpr uint64_t kMs = 1000000;

ThreadTables thread(int pid, const std::string& pid_string, int tid, double start_ms,
                    std::optional<double> end_ms) {
  ThreadTables t;
  t.name = "t" + std::to_string(tid);
  t.process_name = "grow";
  t.pid = Pid{pid};
  t.pid_string = pid_string;
  t.tid = Tid{tid};
  t.is_main_thread = pid == tid;
  t.process_start_ms = start_ms;
  t.process_end_ms = end_ms;
  return t;
}

Recording recording_with(int pid, std::vector<std::pair<uint64_t, uint64_t>> ms_bytes) {
  Recording r;
  r.start_time = MonotonicNs{1000 * kMs};
  for (auto [ms, bytes] : ms_bytes)
    r.memory[Pid{pid}].push_back(
        MemorySample{MonotonicNs{r.start_time.value + ms * kMs}, bytes, 0, 0});
  return r;
}

TEST(MemoryCounters, ChangesSinceTheSampleBeforeOnTheMainThreadWithThePeak) {
  const Recording r = recording_with(7, {{30, 300}, {10, 100}, {20, 500}});  // out of order
  const std::vector<ThreadTables> threads{thread(7, "7", 8, 0, std::nullopt),
                                          thread(7, "7", 7, 0, std::nullopt)};
  const std::vector<MemoryCounter> counters = build_memory_counters(r, threads);
  ASSERT_EQ(counters.size(), 1u);
  EXPECT_EQ(counters[0].main_thread_index, 1u);
  EXPECT_EQ(counters[0].time_ms, (std::vector<double>{10, 20, 30}));
  EXPECT_EQ(counters[0].change, (std::vector<int64_t>{100, 400, -200}));
  EXPECT_EQ(counters[0].peak_bytes, 500u);
  EXPECT_DOUBLE_EQ(counters[0].peak_ms, 20);
}

TEST(MemoryCounters, AReusedPidsSamplesGoToTheProcessAliveThen) {
  const Recording r = recording_with(7, {{10, 100}, {60, 900}});
  const std::vector<ThreadTables> threads{thread(7, "7.1", 7, 0, 50.0),
                                          thread(7, "7", 7, 55, std::nullopt)};
  const std::vector<MemoryCounter> counters = build_memory_counters(r, threads);
  ASSERT_EQ(counters.size(), 2u);
  EXPECT_EQ(counters[0].pid_string, "7");  // the larger peak first
  EXPECT_EQ(counters[0].change, (std::vector<int64_t>{900}));
  EXPECT_EQ(counters[1].pid_string, "7.1");
  EXPECT_EQ(counters[1].change, (std::vector<int64_t>{100}));
}

TEST(MemoryCounters, WrittenAsTheFrontEndsMemoryCounter) {
  const Recording r = recording_with(7, {{10, 4096}});
  const auto counters = build_memory_counters(r, {thread(7, "7", 7, 0, std::nullopt)});
  StringSink sink;
  {
    JsonWriter w(sink);
    w.begin_object();
    write_memory_counters(w, counters);
    w.end_object();
  }
  const std::string json = sink.str();
  EXPECT_NE(json.find("\"category\":\"Memory\""), std::string::npos);
  EXPECT_NE(json.find("\"graphType\":\"line-accumulated\""), std::string::npos);
  EXPECT_NE(json.find("\"count\":[4096]"), std::string::npos);
  EXPECT_NE(json.find("\"pid\":\"7\""), std::string::npos);
}

}  // namespace
}  // namespace bpfprof
