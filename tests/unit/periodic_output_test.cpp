// The pieces of --switch-output and --flight-recorder without BPF: file names, the period a
// profile covers, the files kept, and the model forgetting samples already written.
#include "userspace/session/periodic_output.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <future>
#include <sstream>
#include <thread>

#include "tests/support/synthetic_session.h"
#include "userspace/output/profile_writer.h"

namespace bpfprof {
namespace {

TEST(PeriodicOutput, FileNamesCarryThePeriodsStartInUtc) {
  const double wall_ms = 1700000000000.0 + 500;  // 2023-11-14 22:13:20.5 UTC
  EXPECT_EQ(period_file_name("/nonexistent/profile.json.gz", wall_ms),
            "/nonexistent/profile.20231114T221320Z.json.gz");
  EXPECT_EQ(period_file_name("out.pb.gz", wall_ms), "out.20231114T221320Z.pb.gz");
  EXPECT_EQ(period_file_name("dir.d/prof", wall_ms), "dir.d/prof.20231114T221320Z");
  EXPECT_EQ(period_file_name("/nonexistent/.hidden.json", wall_ms),
            "/nonexistent/.hidden.20231114T221320Z.json");
}

TEST(PeriodicOutput, AnExistingNameIsNotOverwritten) {
  const std::string dir = ::testing::TempDir() + "/periodic_names";
  std::filesystem::create_directories(dir);
  const std::string first = period_file_name(dir + "/p.json", 0);
  FILE* f = fopen(first.c_str(), "w");
  ASSERT_NE(f, nullptr);
  fclose(f);
  EXPECT_EQ(period_file_name(dir + "/p.json", 0), dir + "/p.19700101T000000Z-2.json");
  std::filesystem::remove_all(dir);
}

TEST(PeriodicOutput, RotatedFilesKeepTheNewestN) {
  const std::string dir = ::testing::TempDir() + "/periodic_rotate";
  std::filesystem::create_directories(dir);
  RotatedFiles files(2);
  std::vector<std::string> removed;
  for (int i = 0; i < 4; ++i) {
    const std::string path = dir + "/" + std::to_string(i);
    FILE* f = fopen(path.c_str(), "w");
    ASSERT_NE(f, nullptr);
    fclose(f);
    for (const std::string& gone : files.written(path)) removed.push_back(gone);
  }
  EXPECT_EQ(removed, (std::vector<std::string>{dir + "/0", dir + "/1"}));
  EXPECT_FALSE(std::filesystem::exists(dir + "/1"));
  EXPECT_TRUE(std::filesystem::exists(dir + "/2"));
  EXPECT_TRUE(std::filesystem::exists(dir + "/3"));
  std::filesystem::remove_all(dir);
}

TEST(PeriodicOutput, AWindowShowsThePeriodAndItsLossesThenRestores) {
  Recording r = synthetic::demo_recording();  // 0..100 ms, a loss at 50 ms
  {
    PeriodWindow window(r, synthetic::at_ms(60), synthetic::at_ms(90));
    EXPECT_EQ(r.start_time, synthetic::at_ms(60));
    EXPECT_EQ(r.end_time, synthetic::at_ms(90));
    EXPECT_DOUBLE_EQ(r.start_wall_clock_ms, 1.7e12 + 60);
    EXPECT_TRUE(r.losses.empty());
  }
  EXPECT_EQ(r.start_time, synthetic::at_ms(0));
  EXPECT_EQ(r.end_time, synthetic::at_ms(100));
  EXPECT_DOUBLE_EQ(r.start_wall_clock_ms, 1.7e12);
  EXPECT_EQ(r.losses.size(), 1u);
}

// Two periods written from one model: every sample in exactly one of them.
TEST(PeriodicOutput, DroppedSamplesAreInNoLaterPeriod) {
  Recording recording = synthetic::demo_recording();
  SessionModel model;
  RawStackTree raw;
  synthetic::build_demo_model(model, recording, raw);  // 8 samples of weight, up to 60 ms
  synthetic::FakeSymbolizer symbolizer;
  auto weight_written = [&](MonotonicNs start, MonotonicNs end) {
    PeriodWindow window(recording, start, end);
    StringSink sink;
    ProfileOptions options;
    options.format = OutputFormat::kCollapsed;
    write_profile_with_report(model, recording, sink, options, symbolizer);
    int total = 0;  // the counts at the ends of the folded lines
    std::istringstream lines(sink.str());
    for (std::string line; std::getline(lines, line);)
      total += atoi(line.c_str() + line.rfind(' ') + 1);
    return total;
  };
  EXPECT_EQ(weight_written(synthetic::at_ms(0), synthetic::at_ms(100)), 8);
  model.drop_samples_before(MonotonicNs{UINT64_MAX});
  // A later sample of the worker, after its samples were dropped, starts a new period.
  synthetic::add_demo_sample(model, raw, 150, synthetic::kWorkerTid, 3000000,
                             {synthetic::kDemoBase + synthetic::kWorkerOffset + 0x4});
  EXPECT_EQ(weight_written(synthetic::at_ms(100), synthetic::at_ms(200)), 1);
  ASSERT_EQ(model.threads()[1].samples.size(), 1u);
  EXPECT_EQ(model.threads()[1].samples[0].cpu_delta_ns, 1000000u);  // since its last sample
}

// A long run's stack trees keep only what is in use: the model's for samples still held, the
// recording's raw ones for samples not yet taken; those still resolve.
TEST(PeriodicOutput, CompactedStacksKeepOnlyWhatIsInUse) {
  Recording recording = synthetic::demo_recording();
  SessionModel model;
  synthetic::build_demo_model(model, recording, recording.raw_stacks);
  ASSERT_GT(model.stacks().size(), 0u);
  ASSERT_GT(recording.raw_stacks.size(), 1u);
  const uint64_t worker = synthetic::kDemoBase + synthetic::kWorkerOffset + 0x4;
  recording.samples.push_back(SampleRecord{
      synthetic::at_ms(150), Pid{synthetic::kDemoPid}, Tid{synthetic::kWorkerTid}, Cpu{0},
      CpuTimeNs{3000000}, recording.raw_stacks.intern_path(std::vector<uint64_t>{worker})});
  model.drop_samples_before(MonotonicNs{UINT64_MAX});
  model.compact_stacks(recording);
  EXPECT_EQ(model.stacks().size(), 0u);
  EXPECT_EQ(recording.raw_stacks.size(), 1u);

  model.add_sample(recording.samples.front(), recording.raw_stacks);
  synthetic::FakeSymbolizer symbolizer;
  const BuiltProfile profile = build_profile(model, recording, symbolizer, BuildOptions{});
  ASSERT_EQ(profile.threads.size(), 1u);
  std::vector<std::string> names;
  for (auto stack = profile.threads[0].samples.row(0).stack; stack;
       stack = profile.shared.stacks.prefix(*stack))
    names.push_back(function_name(profile.shared, profile.shared.stacks.frame(*stack)));
  EXPECT_EQ(names, (std::vector<std::string>{"worker_loop", "[truncated]"}));
}

// A snapshot's profile is the model's as it was: a model copied and then emptied (what the
// recorder does after handing a period to the writer) still writes its samples, and the
// recording copy leaves out only what is pending.
TEST(PeriodicOutput, SnapshotsKeepThePeriodAfterTheLiveModelMovesOn) {
  Recording recording = synthetic::demo_recording();
  SessionModel model;
  synthetic::build_demo_model(model, recording, recording.raw_stacks);
  recording.samples.push_back(SampleRecord{synthetic::at_ms(150),
                                           Pid{synthetic::kDemoPid},
                                           Tid{synthetic::kWorkerTid},
                                           Cpu{0},
                                           CpuTimeNs{1},
                                           {}});
  SessionModel snapshot = model;
  Recording metadata = copy_without_pending(recording);
  model.drop_samples_before(MonotonicNs{UINT64_MAX});
  model.compact_stacks(recording);

  EXPECT_TRUE(metadata.samples.empty());
  EXPECT_EQ(metadata.raw_stacks.size(), 0u);
  EXPECT_EQ(metadata.start_time, recording.start_time);
  EXPECT_EQ(metadata.frequency_hz, recording.frequency_hz);
  EXPECT_EQ(recording.samples.size(), 1u);  // the live recording keeps its pending ones
  synthetic::FakeSymbolizer symbolizer;
  const BuiltProfile live = build_profile(model, recording, symbolizer, BuildOptions{});
  const BuiltProfile period = build_profile(snapshot, metadata, symbolizer, BuildOptions{});
  size_t live_samples = 0;
  for (const auto& thread : live.threads) live_samples += thread.samples.size();
  size_t period_samples = 0;
  for (const auto& thread : period.threads) period_samples += thread.samples.size();
  EXPECT_EQ(live_samples, 0u);
  EXPECT_GT(period_samples, 0u);
}

// Jobs run in order on another thread; a submit beyond the waiting room waits for a place;
// finish() runs what is queued.
TEST(BackgroundWriter, RunsJobsInOrderAndBoundsTheQueue) {
  std::vector<int> done;
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<bool> first_started = false;
  BackgroundWriter writer(/*max_waiting=*/1);
  EXPECT_FALSE(writer.submit([&] {
    first_started = true;
    released.wait();
    done.push_back(1);
  }));
  while (!first_started) std::this_thread::yield();
  EXPECT_FALSE(writer.submit([&] { done.push_back(2); }));  // waits in the room
  // The third has no place until the first ends.
  auto third =
      std::async(std::launch::async, [&] { return writer.submit([&] { done.push_back(3); }); });
  EXPECT_EQ(third.wait_for(std::chrono::milliseconds(100)), std::future_status::timeout);
  release.set_value();
  EXPECT_TRUE(third.get());
  writer.finish();
  EXPECT_EQ(done, (std::vector<int>{1, 2, 3}));
  writer.submit([&] { done.push_back(4); });  // after finish: at once, here
  EXPECT_EQ(done, (std::vector<int>{1, 2, 3, 4}));
}

// A job that throws is said and does not stop the ones after it.
TEST(BackgroundWriter, AJobThatThrowsDoesNotStopTheOthers) {
  int ran = 0;
  {
    BackgroundWriter writer;
    writer.submit([] { throw std::runtime_error("disk full"); });
    writer.submit([&] { ++ran; });
  }
  EXPECT_EQ(ran, 1);
}

}  // namespace
}  // namespace bpfprof
