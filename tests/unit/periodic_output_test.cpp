// The pieces of --switch-output and --flight-recorder without BPF: file names, the period a
// profile covers, the files kept, and the model forgetting samples already written.
#include "userspace/session/periodic_output.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <sstream>

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
  Recording r = testing::demo_recording();  // 0..100 ms, a loss at 50 ms
  {
    PeriodWindow window(r, testing::at_ms(60), testing::at_ms(90));
    EXPECT_EQ(r.start_time, testing::at_ms(60));
    EXPECT_EQ(r.end_time, testing::at_ms(90));
    EXPECT_DOUBLE_EQ(r.start_wall_clock_ms, 1.7e12 + 60);
    EXPECT_TRUE(r.losses.empty());
  }
  EXPECT_EQ(r.start_time, testing::at_ms(0));
  EXPECT_EQ(r.end_time, testing::at_ms(100));
  EXPECT_DOUBLE_EQ(r.start_wall_clock_ms, 1.7e12);
  EXPECT_EQ(r.losses.size(), 1u);
}

// Two periods written from one model: every sample in exactly one of them.
TEST(PeriodicOutput, DroppedSamplesAreInNoLaterPeriod) {
  Recording recording = testing::demo_recording();
  SessionModel model;
  RawStackTree raw;
  testing::build_demo_model(model, recording, raw);  // 8 samples of weight, up to 60 ms
  testing::FakeSymbolizer symbolizer;
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
  EXPECT_EQ(weight_written(testing::at_ms(0), testing::at_ms(100)), 8);
  model.drop_samples_before(MonotonicNs{UINT64_MAX});
  // A later sample of the worker, after its samples were dropped, starts a new period.
  testing::add_demo_sample(model, raw, 150, testing::kWorkerTid, 3000000,
                           {testing::kDemoBase + testing::kWorkerOffset + 0x4});
  EXPECT_EQ(weight_written(testing::at_ms(100), testing::at_ms(200)), 1);
  ASSERT_EQ(model.threads()[1].samples.size(), 1u);
  EXPECT_EQ(model.threads()[1].samples[0].cpu_delta_ns, 1000000u);  // since its last sample
}

// A long run's stack trees keep only what is in use: the model's for samples still held, the
// recording's raw ones for samples not yet taken; those still resolve.
TEST(PeriodicOutput, CompactedStacksKeepOnlyWhatIsInUse) {
  Recording recording = testing::demo_recording();
  SessionModel model;
  testing::build_demo_model(model, recording, recording.raw_stacks);
  ASSERT_GT(model.stacks().size(), 0u);
  ASSERT_GT(recording.raw_stacks.size(), 1u);
  const uint64_t worker = testing::kDemoBase + testing::kWorkerOffset + 0x4;
  recording.samples.push_back(SampleRecord{
      testing::at_ms(150), Pid{testing::kDemoPid}, Tid{testing::kWorkerTid}, Cpu{0},
      CpuTimeNs{3000000}, recording.raw_stacks.intern_path(std::vector<uint64_t>{worker})});
  model.drop_samples_before(MonotonicNs{UINT64_MAX});
  model.compact_stacks(recording);
  EXPECT_EQ(model.stacks().size(), 0u);
  EXPECT_EQ(recording.raw_stacks.size(), 1u);

  model.add_sample(recording.samples.front(), recording.raw_stacks);
  testing::FakeSymbolizer symbolizer;
  const BuiltProfile profile = build_profile(model, recording, symbolizer, BuildOptions{});
  ASSERT_EQ(profile.threads.size(), 1u);
  std::vector<std::string> names;
  for (auto stack = profile.threads[0].samples.row(0).stack; stack;
       stack = profile.shared.stacks.prefix(*stack))
    names.push_back(function_name(profile.shared, profile.shared.stacks.frame(*stack)));
  EXPECT_EQ(names, (std::vector<std::string>{"worker_loop", "[truncated]"}));
}

}  // namespace
}  // namespace bpfprof
