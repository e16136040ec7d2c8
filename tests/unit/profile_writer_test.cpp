// The profile writer without BPF or root: its tables, the builder (with a made-up
// symbolizer), the folded output, and the run report behind meta.extra and the summary.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "tests/support/synthetic_session.h"
#include "userspace/cli/summary.h"
#include "userspace/output/json_writer.h"
#include "userspace/output/profile_writer.h"

namespace bpfprof {
namespace {

using synthetic::FakeSymbolizer;

// The JSON of what `write` writes inside one object.
template <typename WriteFn>
std::string object_json(WriteFn&& write) {
  StringSink sink;
  {
    JsonWriter w(sink);
    w.begin_object();
    write(w);
    w.end_object();
  }
  return sink.str();
}

struct ProfileDemo : synthetic::DemoSession {
  BuiltProfile build() { return build_profile(model, recording, symbolizer, BuildOptions{}); }
  std::pair<std::string, RunReport> write(OutputFormat format = OutputFormat::kFirefox) {
    StringSink sink;
    ProfileOptions options;
    options.format = format;
    RunReport report = write_profile_with_report(model, recording, sink, options, symbolizer);
    return {sink.take(), std::move(report)};
  }
};

// Function names of a stack, outermost first.
std::vector<std::string> stack_names(const SharedTables& shared, std::optional<StackIndex> stack) {
  std::vector<std::string> names;
  for (; stack; stack = shared.stacks.prefix(*stack))
    names.insert(names.begin(), function_name(shared, shared.stacks.frame(*stack)));
  return names;
}

std::string printed_summary(const RunReport& report) {
  char* text = nullptr;
  size_t size = 0;
  FILE* out = open_memstream(&text, &size);
  print_run_summary(report, SummaryDetail::kFull, out);
  fclose(out);
  std::string result(text, size);
  free(text);
  return result;
}

TEST(ProfileTables, StackTableWritesParentsAsOffsetsBack) {
  StackTable stacks;
  const StackIndex a = stacks.add(std::nullopt, FrameIndex{5});
  const StackIndex b = stacks.add(a, FrameIndex{6});
  stacks.add(a, FrameIndex{7});
  EXPECT_EQ(stacks.add(a, FrameIndex{6}), b);  // interned
  EXPECT_EQ(stacks.prefix(b), a);
  EXPECT_EQ(stacks.prefix(a), std::nullopt);
  EXPECT_EQ(object_json([&](JsonWriter& w) { stacks.write_json(w); }),
            R"({"stackTable":{"frame":[5,6,7],"prefixOffset":[0,1,2],"length":3}})");
}

TEST(ProfileTables, FuncTableInternsTheNameOfANewFunctionOnly) {
  StringTable strings;
  FuncTable funcs;
  const FuncIndex f = funcs.add(strings, "f", ResourceIndex{0});
  EXPECT_EQ(funcs.add(strings, "f", ResourceIndex{0}), f);
  EXPECT_NE(funcs.add(strings, "f", std::nullopt), f);  // another resource: another function
  EXPECT_EQ(strings.size(), 1u);
  EXPECT_EQ(object_json([&](JsonWriter& w) { funcs.write_json(w); }),
            R"({"funcTable":{"name":[0,0],"isJS":[false,false],"relevantForJS":[false,false],)"
            R"("resource":[0,-1],"source":[null,null],"lineNumber":[null,null],)"
            R"("columnNumber":[null,null],"originalLocation":[null,null],"length":2}})");
}

TEST(ProfileTables, FramesWithoutAddressLibSymbolOrLineSayNone) {
  FrameTable frames;
  FrameTable::Frame named;
  named.address = 0x10;
  named.lib = LibIndex{2};
  named.category = Category::kUser;
  named.func = FuncIndex{3};
  named.native_symbol = NativeSymbolIndex{4};
  named.inline_depth = 1;
  named.line = 42;
  frames.add(named);
  FrameTable::Frame pseudo;
  pseudo.category = Category::kIdle;
  pseudo.func = FuncIndex{0};
  frames.add(pseudo);
  EXPECT_EQ(object_json([&](JsonWriter& w) { frames.write_json(w); }),
            R"({"frameTable":{"address":[16,-1],"lib":[2,-1],"inlineDepth":[1,0],)"
            R"("category":[1,3],"subcategory":[0,0],"func":[3,0],"nativeSymbol":[4,null],)"
            R"("innerWindowID":[0,0],"line":[42,null],"column":[null,null],)"
            R"("originalLocation":[null,null],"length":2}})");
}

TEST(ProfileTables, SampleWeightsAreNullWhenAllAreOne) {
  // Model stack 1 is output stack 0; the model's root stack is the empty stack (null).
  auto output_stack_of = std::make_shared<std::vector<StackIndex>>(
      std::vector<StackIndex>{StackIndex{7}, StackIndex{0}});
  const MonotonicNs zero{1000000000};
  std::vector<ThreadSample> model_samples{
      {MonotonicNs{zero.value + 1500000}, 1, 100, 1.0},
      {MonotonicNs{zero.value + 2500400}, ResolvedStackTree::kRoot, 200, 1.0}};
  const SamplesTable samples(model_samples, output_stack_of, zero);
  EXPECT_EQ(object_json([&](JsonWriter& w) { samples.write_json(w); }),
            R"({"samples":{"stack":[0,null],"time":[1.5,2.5],"threadCPUDelta":[100,200],)"
            R"("weight":null,"weightType":"samples","length":2}})");
  model_samples.push_back({MonotonicNs{zero.value + 3500000}, 1, 300, 2.0});
  EXPECT_NE(object_json([&](JsonWriter& w) { samples.write_json(w); }).find(R"("weight":[1,1,2])"),
            std::string::npos);
}

TEST(ProfileBuilder, ThreadsStacksAndWeightsComeFromTheModel) {
  ProfileDemo demo;
  const BuiltProfile profile = demo.build();
  ASSERT_EQ(profile.threads.size(), 2u);
  const ThreadTables& main = profile.threads[0];
  const ThreadTables& worker = profile.threads[1];
  EXPECT_EQ(main.name, "demo");
  EXPECT_TRUE(main.is_main_thread);
  EXPECT_EQ(main.pid_string, "4242");
  EXPECT_EQ(worker.name, "worker");
  EXPECT_FALSE(worker.is_main_thread);

  // Four consecutive identical ticks: the thread's first sample, then one of weight 3.
  ASSERT_EQ(main.samples.size(), 4u);
  EXPECT_EQ(main.samples.row(0).weight, 1.0);
  EXPECT_EQ(main.samples.row(0).time_ms, 10.0);
  EXPECT_EQ(main.samples.row(1).weight, 3.0);
  EXPECT_EQ(main.samples.row(1).stack, main.samples.row(0).stack);
  EXPECT_EQ(stack_names(profile.shared, main.samples.row(0).stack),
            (std::vector<std::string>{"_start", "main", "compute_hash"}));
  // A stack that does not reach a thread root says so.
  ASSERT_EQ(worker.samples.size(), 2u);
  EXPECT_EQ(stack_names(profile.shared, worker.samples.row(0).stack),
            (std::vector<std::string>{"[truncated]", "worker_loop"}));

  EXPECT_EQ(profile.summary.user_stacks.complete, 6.0);
  EXPECT_EQ(profile.summary.user_stacks.total, 8.0);
  ASSERT_FALSE(profile.summary.top_self_functions.empty());
  EXPECT_EQ(profile.summary.top_self_functions[0].first, "compute_hash (demo)");
  EXPECT_EQ(profile.summary.top_self_functions[0].second, 0.5);
}

// Everything the profile names is interned while building: serializing needs nothing more,
// so the tables can be written in any order.
TEST(ProfileBuilder, LossMarkersAreNamedBeforeAnythingIsWritten) {
  ProfileDemo demo;
  const BuiltProfile profile = demo.build();
  const auto& strings = profile.shared.strings.strings();
  EXPECT_NE(std::find(strings.begin(), strings.end(), "Events lost"), strings.end());
  EXPECT_EQ(profile.threads[0].markers.size(), 1u);  // the main thread of the pid
  EXPECT_EQ(profile.threads[1].markers.size(), 0u);
  const size_t strings_before = profile.shared.strings.size();
  object_json([&](JsonWriter& w) {
    for (const ThreadTables& thread : profile.threads) thread.markers.write_json(w);
    profile.shared.write_json(w);
  });
  EXPECT_EQ(profile.shared.strings.size(), strings_before);
}

// The main thread of the demo waits twice: the worker wakes it (its stack: worker_loop), then
// an interrupt (a kernel stack).
TEST(ProfileBuilder, WokenWaitsAreIntervalMarkersWithTheWakerAndItsStackAsTheCause) {
  using synthetic::at_ms;
  Recording recording = synthetic::demo_recording();
  recording.off_cpu = true;
  const WakerId worker = recording.wakers.intern(
      Waker{WakerContext::kThread, Pid{synthetic::kDemoPid}, Tid{synthetic::kWorkerTid}, "worker"});
  const WakerId interrupt = recording.wakers.intern(Waker{WakerContext::kInterrupt, {}, {}, ""});
  SessionModel model;
  RawStackTree raw;
  model.configure_for(recording);
  model.apply(at_ms(0), ProcessStartEvent{Pid{synthetic::kDemoPid}, "demo", false});
  MmapEvent mmap{Pid{synthetic::kDemoPid}, Tid{synthetic::kDemoPid}, {}};
  mmap.mapping = {.start = synthetic::kDemoBase, .length = 0x1000, .path = "/opt/demo/demo"};
  model.apply(at_ms(0), mmap);
  model.consume(recording, at_ms(0));  // takes the wakers
  auto event = [&](uint64_t us, SampleKind kind, RawStackId stack = RawStackTree::kRoot,
                   WakerId waker = WakerId{}) {
    SampleRecord s{MonotonicNs{us * 1000},
                   Pid{synthetic::kDemoPid},
                   Tid{synthetic::kDemoPid},
                   Cpu{0},
                   CpuTimeNs{us * 100},
                   stack,
                   kind,
                   OffCpuState::kSleeping};
    s.waker = waker;
    model.add_sample(s, raw);
  };
  const RawStackId worker_stack =
      raw.intern_path(std::vector<uint64_t>{synthetic::kDemoBase + synthetic::kWorkerOffset + 4});
  const RawStackId interrupt_stack = raw.intern_path(std::vector<uint64_t>{0xffffffff81000010ull});
  event(10000, SampleKind::kSwitchOut);
  event(15000, SampleKind::kWaking, worker_stack, worker);
  event(15100, SampleKind::kSwitchIn);
  event(20000, SampleKind::kSwitchOut);
  event(23000, SampleKind::kWaking, interrupt_stack, interrupt);
  event(23050, SampleKind::kSwitchIn);
  model.finish(recording.end_time);

  FakeSymbolizer symbolizer;
  const BuiltProfile profile = build_profile(model, recording, symbolizer, BuildOptions{});
  ASSERT_EQ(profile.threads.size(), 1u);
  const std::string json =
      object_json([&](JsonWriter& w) { profile.threads[0].markers.write_json(w); });
  const auto& strings = profile.shared.strings.strings();
  for (const char* name : {"Woken by worker (4243)", "Woken by interrupt: do_syscall_64"})
    EXPECT_NE(std::find(strings.begin(), strings.end(), name), strings.end()) << name;
  // After the demo's loss marker (an instant at 50 ms).
  EXPECT_NE(json.find("\"startTime\":[50,10,20],\"endTime\":[null,15,23],\"phase\":[0,1,1]"),
            std::string::npos)
      << json;
  EXPECT_NE(
      json.find("\"state\":\"sleeping\",\"duration\":5,\"waker\":\"worker (4243)\","
                "\"wakerThread\":\"worker\",\"wakerTid\":4243,\"wakerProcess\":\"demo (4242)\","
                "\"cause\":{\"stack\":"),
      std::string::npos)
      << json;
  EXPECT_NE(
      json.find("\"waker\":\"interrupt: do_syscall_64\",\"wakerThread\":\"interrupt\",\"cause\""),
      std::string::npos)
      << json;
  ASSERT_EQ(profile.summary.top_wakers.size(), 1u);
  const ProcessWakers& top = profile.summary.top_wakers[0];
  EXPECT_EQ(top.process, "demo (4242)");
  ASSERT_EQ(top.top.size(), 2u);
  EXPECT_EQ(top.top[0].waker, "worker (4243)");
  EXPECT_DOUBLE_EQ(top.top[0].waited_ms, 5.0);
  EXPECT_EQ(top.top[1].waker, "interrupt: do_syscall_64");
  EXPECT_EQ(top.top[1].wakings, 1u);
}

TEST(ProfileBuilder, AnAddressOutsideAnyMappingIsNamedByItAndCutsTheStack) {
  ProfileDemo demo;
  // The root is a return address (nudged into its call), the leaf the sampled instruction.
  synthetic::add_demo_sample(demo.model, demo.raw, 90, synthetic::kDemoPid, 30000000,
                             {0x7000, 0x7100});
  const FrameKey leaf = demo.model.stacks().node(demo.model.threads()[0].samples.back().stack).key;
  EXPECT_EQ(leaf.kind, FrameKind::kUnmapped);
  const BuiltProfile profile = demo.build();
  EXPECT_EQ(
      stack_names(profile.shared,
                  profile.threads[0].samples.row(profile.threads[0].samples.size() - 1).stack),
      (std::vector<std::string>{"[truncated]", "0x6fff", "0x7100"}));
}

TEST(ProfileWriter, FoldedStacksCountSamplingIntervals) {
  ProfileDemo demo;
  const auto [folded, report] = demo.write(OutputFormat::kCollapsed);
  EXPECT_EQ(folded,
            "demo (4242);demo;_start;main 2\n"
            "demo (4242);demo;_start;main;compute_hash 4\n"
            "demo (4242);worker;[truncated];worker_loop 2\n");
  EXPECT_EQ(report.profile.user_stacks.total, 8.0);
}

TEST(RunReport, MetaExtraAndTheSummaryShowTheSameFigures) {
  ProfileDemo demo;
  const auto [json, report] = demo.write();
  // The figures, as recorded and measured.
  EXPECT_EQ(report.samples, 8u);
  EXPECT_EQ(report.lost_events, 6u);  // 5 in the ring buffer, 1 side-band record
  EXPECT_EQ(report.lost_ring_buffer_events, 5u);
  ASSERT_EQ(report.lost_by_cpu.size(), 1u);
  EXPECT_EQ(report.lost_by_cpu[0].cpu, 1u);
  ASSERT_EQ(report.lost_by_process.size(), 1u);
  EXPECT_EQ(report.lost_by_process[0].process, "demo (4242)");
  EXPECT_EQ(report.profile.user_stacks.share(), 0.75);
  ASSERT_EQ(report.processes_by_cpu_time.size(), 1u);

  // meta.extra says them.
  auto entry = [](const char* label, const char* format, const std::string& value) {
    return std::string(R"({"label":")") + label + R"(","format":")" + format + R"(","value":)" +
           value + "}";
  };
  EXPECT_NE(json.find(entry("Samples", "integer", "8")), std::string::npos) << json;
  EXPECT_NE(json.find(entry("Lost events", "integer", "6")), std::string::npos);
  EXPECT_NE(json.find(entry("User stacks complete", "percentage", "0.75")), std::string::npos);
  EXPECT_NE(json.find(entry("Lost events per CPU", "string", R"("CPU 1: 5")")), std::string::npos);
  EXPECT_NE(json.find(entry("Lost events by process", "string", R"("demo (4242): 5")")),
            std::string::npos);
  EXPECT_NE(json.find(entry("Truncated user stacks by process", "string",
                            R"("demo (4242): 25.0% of 8")")),
            std::string::npos);
  EXPECT_NE(json.find(entry("Where truncated user stacks end", "string",
                            R"("worker_loop (demo) 25.0%")")),
            std::string::npos)
      << json;
  EXPECT_NE(json.find(R"("sampledThreads":2,"lostEvents":6)"), std::string::npos);

  // The summary says them too, in the lines a recording has always printed.
  const std::string printed = printed_summary(report);
  EXPECT_NE(printed.find("bpfprof: 8 samples (cpu-clock, 1000 Hz) from 1 processes and 2 "
                         "threads; 6 events lost\n"),
            std::string::npos)
      << printed;
  EXPECT_NE(printed.find("bpfprof: user stacks complete: 75.0% of 8 on-CPU samples reach a "
                         "thread root (the rest begin with [truncated]); least complete: demo "
                         "(4242) 75.0%; cut at: worker_loop (demo) 25.0%\n"),
            std::string::npos);
  EXPECT_NE(printed.find("bpfprof: 5 events lost (ring buffer full; try a larger --buffer-size "
                         "or a lower -F): CPU 1 5; in demo (4242) 5\n"),
            std::string::npos);
  EXPECT_NE(printed.find("bpfprof: top processes by CPU time: demo (4242) "), std::string::npos);
  EXPECT_NE(printed.find("bpfprof: top functions by on-CPU samples (self):\n   50.0%  "
                         "compute_hash (demo)\n"),
            std::string::npos);
  EXPECT_EQ(printed.find("without a symbol"), std::string::npos);  // everything was named
  EXPECT_EQ(printed.find("unwinding"), std::string::npos);         // no stack was copied
}

TEST(RunReport, UnwindingCostIsReportedForCopiedStacks) {
  ProfileDemo demo;
  demo.recording.stats.user_stacks_taken = 1545;
  demo.recording.stats.copied_stacks = 100;
  demo.recording.stats.stack_copy_bytes = 409600;
  demo.recording.stats.copy_event_bytes = 512000;
  demo.recording.stats.unwind_ns = {3000, 1000, 2000};
  demo.recording.stats.stacks_cut_at_copy_end = 2;
  const RunReport report = build_run_report(demo.recording, demo.model, demo.build().summary);
  ASSERT_TRUE(report.unwinding);
  EXPECT_EQ(report.unwinding->median_us, 2.0);
  const std::string printed = printed_summary(report);
  EXPECT_NEAR(report.unwinding->total_ms, 0.2, 1e-9);  // 100 stacks at the kept times' mean
  // Per copy, not per sample: how many copies, of how many stacks.
  EXPECT_NE(printed.find("bpfprof: user stacks copied and unwound in userspace: 100 of 1545 taken "
                         "(samples, switch-outs, wakers); per copy: unwinding 2.0 us (median), "
                         "4096 bytes of stack and 5120 of event (mean); unwinding 0.2 ms in "
                         "all\n"),
            std::string::npos)
      << printed;
  EXPECT_NE(printed.find("bpfprof: 2.0% of the copied stacks were cut where their copy ended "
                         "(before "
                         "their process got a larger copy)\n"),
            std::string::npos);
}

}  // namespace
}  // namespace bpfprof
