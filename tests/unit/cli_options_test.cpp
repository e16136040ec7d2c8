#include "userspace/cli/options.h"
#include "userspace/session/collect_loop.h"

#include <gtest/gtest.h>

#include <vector>

namespace bpfprof {
namespace {

ParsedCommandLine parse(std::vector<const char*> args) {
  args.insert(args.begin(), "bpfprof");
  return parse_command_line(static_cast<int>(args.size()), args.data());
}

TEST(CliOptions, RecordACommandWithDefaults) {
  ParsedCommandLine parsed = parse({"record", "--", "sleep", "1"});
  ASSERT_TRUE(std::holds_alternative<RecordOptions>(parsed));
  const auto& options = std::get<RecordOptions>(parsed);
  EXPECT_EQ(options.command, (std::vector<std::string>{"sleep", "1"}));
  EXPECT_EQ(options.frequency_hz, 1000u);
  EXPECT_EQ(options.output_path, "profile.json.gz");
  EXPECT_EQ(options.user_stack_copy_bytes, 16384u);  // dwarf by default, the fallback's copies
  EXPECT_FALSE(options.fixed_stack_copy_size);
  EXPECT_FALSE(options.off_cpu.has_value());
}

TEST(CliOptions, LastFrequencyWinsAsInPerf) {
  const auto parsed = parse({"record", "-F", "99", "-F", "4000", "--", "true"});
  ASSERT_TRUE(std::holds_alternative<RecordOptions>(parsed));
  EXPECT_EQ(std::get<RecordOptions>(parsed).frequency_hz, 4000u);
}

TEST(CliOptions, PidsAreCommaSeparated) {
  const auto parsed = parse({"record", "-p", "12,34"});
  ASSERT_TRUE(std::holds_alternative<RecordOptions>(parsed));
  EXPECT_EQ(std::get<RecordOptions>(parsed).attach_pids, (std::vector<int>{12, 34}));
}

TEST(CliOptions, CollapsedFormatChangesTheDefaultOutputOnly) {
  auto parsed = parse({"record", "--format", "collapsed", "--", "true"});
  EXPECT_EQ(std::get<RecordOptions>(parsed).output_path, "profile.folded");
  parsed = parse({"record", "--format", "collapsed", "-o", "x.txt", "--", "true"});
  EXPECT_EQ(std::get<RecordOptions>(parsed).output_path, "x.txt");
}

TEST(CliOptions, OffCpuFlagsExcludeEachOther) {
  EXPECT_EQ(*std::get<RecordOptions>(parse({"record", "--no-off-cpu", "-a"})).off_cpu, false);
  const auto parsed = parse({"record", "--off-cpu", "--no-off-cpu", "-a"});
  ASSERT_TRUE(std::holds_alternative<UsageError>(parsed));
  EXPECT_EQ(std::get<UsageError>(parsed).status, 2);
}

TEST(CliOptions, WakersAreOnWithTheirThresholdUnlessSaidOtherwise) {
  const auto defaults = std::get<RecordOptions>(parse({"record", "--", "true"}));
  EXPECT_TRUE(defaults.wakers);
  EXPECT_FALSE(defaults.wake_threshold_ms.has_value());
  const auto set = std::get<RecordOptions>(
      parse({"record", "--no-wakers", "--wake-threshold", "2.5", "--", "true"}));
  EXPECT_FALSE(set.wakers);
  EXPECT_DOUBLE_EQ(*set.wake_threshold_ms, 2.5);
  for (const char* bad : {"0", "-1", "soon"}) {
    const auto parsed = parse({"record", "--wake-threshold", bad, "--", "true"});
    ASSERT_TRUE(std::holds_alternative<UsageError>(parsed)) << bad;
    EXPECT_EQ(std::get<UsageError>(parsed).status, 2);
  }
}

TEST(CliOptions, CallGraph) {
  RecordOptions options;
  EXPECT_FALSE(apply_call_graph("fp", options));
  EXPECT_EQ(options.user_stack_copy_bytes, 0u);
  EXPECT_EQ(options.call_graph, CallGraph::kFramePointers);
  EXPECT_FALSE(apply_call_graph("dwarf,16000", options));
  EXPECT_EQ(options.user_stack_copy_bytes, 16000u);
  EXPECT_TRUE(options.fixed_stack_copy_size);
  EXPECT_FALSE(apply_call_graph("dwarf,100", options));
  EXPECT_EQ(options.user_stack_copy_bytes, 96u);  // whole 8-byte words
  EXPECT_FALSE(apply_call_graph("dwarf", options));
  EXPECT_FALSE(options.fixed_stack_copy_size);
  EXPECT_EQ(options.call_graph, CallGraph::kDwarf);  // in the kernel, copies as the fallback
  EXPECT_FALSE(apply_call_graph("dwarf-copy", options));
  EXPECT_EQ(options.call_graph, CallGraph::kDwarfCopy);
  EXPECT_EQ(options.user_stack_copy_bytes, 8192u);
  EXPECT_FALSE(apply_call_graph("dwarf-copy,32768", options));
  EXPECT_EQ(options.user_stack_copy_bytes, 32768u);
  EXPECT_EQ(options.call_graph, CallGraph::kDwarfCopy);
  EXPECT_FALSE(apply_call_graph("fp", options));
  EXPECT_EQ(options.call_graph, CallGraph::kFramePointers);
  for (const char* bad : {"dwarf,", "dwarf,x", "dwarf,63", "dwarf,65529", "dwarf,-8", "lbr",
                          "dwarf,99999999999999999999", "dwarf,8k", "dwarf-copy,", "dwarf-copyx",
                          "dwarf-cop", "dwarf,dwarf-copy"})
    EXPECT_TRUE(apply_call_graph(bad, options)) << bad;
}

TEST(CliOptions, RingBufferSize) {
  EXPECT_EQ(parse_ring_buffer_size("64K"), 64u << 10);
  EXPECT_EQ(parse_ring_buffer_size("16m"), 16u << 20);
  EXPECT_EQ(parse_ring_buffer_size("1G"), 1u << 30);
  EXPECT_EQ(parse_ring_buffer_size("1048576"), 1u << 20);
  for (const char* bad :
       {"", "32K", "3M", "2G", "-64K", "64KB", "K", "99999999999999999999M", "17179869184K"})
    EXPECT_FALSE(parse_ring_buffer_size(bad)) << bad;
}

// Without --buffer-size: 2 MB a CPU, 4 to 16 MB, a power of two; 16 MB when every stack is
// copied (~25 KB a sample).
TEST(CliOptions, DefaultRingBufferFollowsTheCpus) {
  EXPECT_EQ(default_ring_buffer_bytes(CallGraph::kDwarf, 1), 4u << 20);
  EXPECT_EQ(default_ring_buffer_bytes(CallGraph::kDwarf, 2), 4u << 20);
  EXPECT_EQ(default_ring_buffer_bytes(CallGraph::kFramePointers, 3), 8u << 20);
  EXPECT_EQ(default_ring_buffer_bytes(CallGraph::kDwarf, 8), 16u << 20);
  EXPECT_EQ(default_ring_buffer_bytes(CallGraph::kDwarf, 4096), 16u << 20);
  EXPECT_EQ(default_ring_buffer_bytes(CallGraph::kDwarfCopy, 2), 16u << 20);
  auto parsed = parse({"record", "--", "true"});
  EXPECT_FALSE(std::get<RecordOptions>(parsed).ring_buffer_bytes);
}

TEST(CliOptions, BadOptionsAreOneLineWithTheRightHelp) {
  auto parsed = parse({"record", "--buffer-size", "3M", "--", "true"});
  ASSERT_TRUE(std::holds_alternative<UsageError>(parsed));
  EXPECT_NE(std::get<UsageError>(parsed).message.find("power of two"), std::string::npos);
  parsed = parse({"record", "--frobnicate"});
  ASSERT_TRUE(std::holds_alternative<UsageError>(parsed));
  EXPECT_NE(std::get<UsageError>(parsed).message.find("bpfprof record --help"), std::string::npos);
  parsed = parse({});
  ASSERT_TRUE(std::holds_alternative<UsageError>(parsed));
  EXPECT_NE(std::get<UsageError>(parsed).message.find("(see bpfprof --help)"), std::string::npos);
  parsed = parse({"record", "-F", "0", "--", "true"});
  EXPECT_TRUE(std::holds_alternative<UsageError>(parsed));
}

TEST(CliOptions, HelpAndVersionAreInformation) {
  auto parsed = parse({"--version"});
  ASSERT_TRUE(std::holds_alternative<InformationRequest>(parsed));
  EXPECT_NE(std::get<InformationRequest>(parsed).text.find("bpfprof "), std::string::npos);
  parsed = parse({"record", "--help"});
  ASSERT_TRUE(std::holds_alternative<InformationRequest>(parsed));
  EXPECT_NE(std::get<InformationRequest>(parsed).text.find("--call-graph"), std::string::npos);
}

TEST(CliOptions, ReplayAndServe) {
  auto parsed = parse({"replay", "events.bin", "-o", "out.json.gz"});
  ASSERT_TRUE(std::holds_alternative<ReplayOptions>(parsed));
  EXPECT_EQ(std::get<ReplayOptions>(parsed).events_path, "events.bin");
  EXPECT_EQ(std::get<ReplayOptions>(parsed).output_path, "out.json.gz");
  parsed = parse({"serve", "p.json.gz", "--port", "8123", "--no-browser"});
  ASSERT_TRUE(std::holds_alternative<ServeOptions>(parsed));
  EXPECT_EQ(std::get<ServeOptions>(parsed).port, 8123);
  EXPECT_FALSE(std::get<ServeOptions>(parsed).open_browser);
  const std::string dir = testing::TempDir();
  parsed = parse({"serve", "p.json.gz", "--symbol-dir", dir.c_str()});
  ASSERT_TRUE(std::holds_alternative<ServeOptions>(parsed));
  EXPECT_EQ(std::get<ServeOptions>(parsed).symbol_dirs, std::vector<std::string>{dir});
  parsed = parse({"serve", "p.json.gz", "--symbol-dir", "/nonexistent/dir"});
  EXPECT_TRUE(std::holds_alternative<UsageError>(parsed));
}

TEST(CliOptions, EmbedSources) {
  auto parsed = parse({"record", "--embed-sources", "--", "true"});
  ASSERT_TRUE(std::holds_alternative<RecordOptions>(parsed));
  EXPECT_TRUE(std::get<RecordOptions>(parsed).embed_sources);
  parsed = parse({"record", "--", "true"});
  ASSERT_TRUE(std::holds_alternative<RecordOptions>(parsed));
  EXPECT_FALSE(std::get<RecordOptions>(parsed).embed_sources);
}

TEST(CliOptions, PprofFormatAndConvert) {
  auto parsed = parse({"record", "--format", "pprof", "--", "true"});
  EXPECT_EQ(std::get<RecordOptions>(parsed).format, OutputFormat::kPprof);
  EXPECT_EQ(std::get<RecordOptions>(parsed).output_path, "profile.pb.gz");
  parsed = parse({"convert", "in.json.gz"});
  ASSERT_TRUE(std::holds_alternative<ConvertOptions>(parsed));
  EXPECT_EQ(std::get<ConvertOptions>(parsed).input_path, "in.json.gz");
  EXPECT_EQ(std::get<ConvertOptions>(parsed).output_path, "profile.pb.gz");
  EXPECT_EQ(std::get<ConvertOptions>(parsed).format, OutputFormat::kPprof);
  parsed = parse({"convert", "in.json.gz", "--format", "collapsed", "-o", "x.folded"});
  EXPECT_EQ(std::get<ConvertOptions>(parsed).format, OutputFormat::kCollapsed);
  EXPECT_EQ(std::get<ConvertOptions>(parsed).output_path, "x.folded");
}

TEST(CliOptions, SwitchOutputAndFlightRecorderTakeDurations) {
  auto parsed = parse({"record", "-a", "--switch-output", "2s", "--switch-output-files", "3"});
  ASSERT_TRUE(std::holds_alternative<RecordOptions>(parsed));
  EXPECT_EQ(std::get<RecordOptions>(parsed).switch_output_seconds, 2.0);
  EXPECT_EQ(std::get<RecordOptions>(parsed).switch_output_files, 3u);
  parsed = parse({"record", "-a", "--flight-recorder", "5m"});
  EXPECT_EQ(std::get<RecordOptions>(parsed).flight_recorder_seconds, 300.0);
  EXPECT_EQ(parse_duration("1h"), 3600.0);
  EXPECT_EQ(parse_duration("90"), 90.0);
  EXPECT_EQ(parse_duration("5x"), std::nullopt);
  EXPECT_EQ(parse_duration("-5"), std::nullopt);
  for (std::vector<const char*> bad : {
           std::vector<const char*>{"record", "-a", "--switch-output", "0.5s"},
           {"record", "-a", "--switch-output", "soon"},
           {"record", "-a", "--switch-output-files", "3"},
           {"record", "-a", "--switch-output", "2s", "--flight-recorder", "5s"},
       }) {
    parsed = parse(bad);
    ASSERT_TRUE(std::holds_alternative<UsageError>(parsed)) << bad[3];
    EXPECT_EQ(std::get<UsageError>(parsed).message.find('\n'), std::string::npos);
  }
}

}  // namespace
}  // namespace bpfprof
