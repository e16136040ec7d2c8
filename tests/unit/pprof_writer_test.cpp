// The pprof writer and `convert`'s reader without BPF or root: the hand-made session of
// synthetic_session.h and hand-made tables, written as profile.proto and parsed back with
// the same generated code that Go's pprof's schema describes.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "profile.pb.h"
#include "tests/support/synthetic_session.h"
#include "userspace/output/pprof_writer.h"
#include "userspace/output/processed_profile_reader.h"
#include "userspace/output/profile_writer.h"

namespace bpfprof {
namespace {

namespace pb = perftools::profiles;

struct PprofDemo : synthetic::DemoSession {
  std::string write(OutputFormat format) {
    StringSink sink;
    ProfileOptions options;
    options.format = format;
    write_profile_with_report(model, recording, sink, options, symbolizer);
    return sink.take();
  }
};

pb::Profile parse(const std::string& bytes) {
  pb::Profile profile;
  EXPECT_TRUE(profile.ParseFromString(bytes));
  return profile;
}

// A readable form of a pprof profile: per stack (function names outermost first, ";"
// between, inline lines joined by "+" innermost first) and labels, the summed values.
std::map<std::string, std::vector<int64_t>> samples_by_stack(const pb::Profile& p) {
  auto str = [&](int64_t i) { return p.string_table(static_cast<int>(i)); };
  std::map<uint64_t, std::string> function_names;
  for (const pb::Function& f : p.function()) function_names[f.id()] = str(f.name());
  std::map<uint64_t, std::string> location_names;
  for (const pb::Location& l : p.location()) {
    std::string name;
    for (const pb::Line& line : l.line())
      name += (name.empty() ? "" : "+") + function_names.at(line.function_id());
    location_names[l.id()] = name;
  }
  std::map<std::string, std::vector<int64_t>> out;
  for (const pb::Sample& s : p.sample()) {
    std::string key;
    for (int i = s.location_id_size() - 1; i >= 0; --i)
      key += location_names.at(s.location_id(i)) + (i ? ";" : "");
    for (const pb::Label& label : s.label())
      key += " " + str(label.key()) + "=" +
             (label.str() ? str(label.str()) : std::to_string(label.num()));
    std::vector<int64_t>& values = out[key];
    values.resize(static_cast<size_t>(s.value_size()));
    for (int i = 0; i < s.value_size(); ++i) values[static_cast<size_t>(i)] += s.value(i);
  }
  return out;
}

TEST(PprofWriter, SampleTypesValuesAndLabelsComeFromTheModel) {
  PprofDemo demo;
  const pb::Profile p = parse(demo.write(OutputFormat::kPprof));
  ASSERT_EQ(p.sample_type_size(), 2);  // the demo recorded no off-CPU time
  EXPECT_EQ(p.string_table(static_cast<int>(p.sample_type(0).type())), "samples");
  EXPECT_EQ(p.string_table(static_cast<int>(p.sample_type(0).unit())), "count");
  EXPECT_EQ(p.string_table(static_cast<int>(p.sample_type(1).type())), "cpu");
  EXPECT_EQ(p.string_table(static_cast<int>(p.sample_type(1).unit())), "nanoseconds");
  EXPECT_EQ(p.period(), 1000000);
  EXPECT_EQ(p.duration_nanos(), 100000000);
  EXPECT_EQ(p.time_nanos(), 1700000000000000000);
  // CPU time: each sample's delta from the thread's runtime (10..13 ms, then 21 and 22 ms;
  // the worker's 1 and 2 ms); the main thread's first sample carries its runtime so far.
  const auto samples = samples_by_stack(p);
  const std::string main_labels = " pid=4242 tid=4242 process_name=demo thread_name=demo";
  EXPECT_EQ(samples.at("_start;main;compute_hash" + main_labels)[0], 4);
  EXPECT_EQ(samples.at("_start;main" + main_labels)[0], 2);
  EXPECT_EQ(samples.at("[truncated];worker_loop pid=4242 tid=4243 process_name=demo "
                       "thread_name=worker")[0],
            2);
  int64_t cpu = 0;
  for (const auto& [stack, values] : samples) cpu += values[1];
  EXPECT_EQ(cpu, 22000000 + 2000000);  // the threads' runtimes at their last samples
}

TEST(PprofWriter, LocationsLieInTheirLibrarysMapping) {
  PprofDemo demo;
  const pb::Profile p = parse(demo.write(OutputFormat::kPprof));
  ASSERT_EQ(p.mapping_size(), 1);
  const pb::Mapping& m = p.mapping(0);
  EXPECT_EQ(p.string_table(static_cast<int>(m.filename())), "/opt/demo/demo");
  EXPECT_TRUE(m.has_functions());
  bool compute_seen = false;
  for (const pb::Location& l : p.location()) {
    if (l.mapping_id() == 0) continue;  // [truncated]
    EXPECT_EQ(l.mapping_id(), m.id());
    EXPECT_GE(l.address(), m.memory_start());
    EXPECT_LT(l.address(), m.memory_limit());
    // compute_hash's sample: offset 0x308 in the file, the relative address the Firefox
    // profile gives.
    if (l.address() - m.memory_start() + m.file_offset() == synthetic::kComputeOffset + 0x8)
      compute_seen = true;
  }
  EXPECT_TRUE(compute_seen);
}

// Hand-made tables: a leaf with two functions inlined at one address, and a wait.
BuiltProfile inline_and_wait_profile(std::vector<ThreadSample>& samples,
                                     std::shared_ptr<std::vector<StackIndex>>& stack_of) {
  BuiltProfile out;
  SharedTables& t = out.shared;
  LibraryDescription lib;
  lib.name = "app";
  lib.path = "/usr/bin/app";
  lib.code_id = "abcdef0123";
  const LibIndex app = out.libs.add(lib);
  const ResourceIndex resource = t.resources.add(t.strings.intern("app"));
  auto code = [&](const char* name, uint32_t depth, uint32_t address) {
    FrameTable::Frame f;
    f.category = Category::kUser;
    f.address = address;
    f.lib = app;
    f.inline_depth = depth;
    f.func = t.funcs.add(t.strings, name, resource, t.sources.add(t.strings, "app.c"));
    f.line = 10 + depth;
    return t.frames.add(f);
  };
  FrameTable::Frame sleeping;
  sleeping.category = Category::kIdle;
  sleeping.func = t.funcs.add(t.strings, "[sleeping]", std::nullopt);
  const StackIndex main = t.stacks.add(std::nullopt, code("main", 0, 0x100));
  const StackIndex outer = t.stacks.add(main, code("run", 0, 0x200));
  const StackIndex middle = t.stacks.add(outer, code("step", 1, 0x200));
  const StackIndex inner = t.stacks.add(middle, code("add", 2, 0x200));
  const StackIndex wait = t.stacks.add(main, t.frames.add(sleeping));
  stack_of = std::make_shared<std::vector<StackIndex>>(std::vector<StackIndex>{inner, wait});
  samples = {ThreadSample{MonotonicNs{1000000}, 0, 3000000, 3.0},
             ThreadSample{MonotonicNs{5000000}, 1, 0, 2.5}};
  ThreadTables thread;
  thread.name = "app";
  thread.process_name = "app";
  thread.pid = Pid{7};
  thread.tid = Tid{7};
  thread.samples = SamplesTable(samples, stack_of, MonotonicNs{0});
  out.threads.push_back(std::move(thread));
  return out;
}

TEST(PprofWriter, InlinedFunctionsAreLinesOfOneLocationInnermostFirst) {
  std::vector<ThreadSample> samples;
  std::shared_ptr<std::vector<StackIndex>> stack_of;
  const BuiltProfile profile = inline_and_wait_profile(samples, stack_of);
  StringSink sink;
  write_pprof(profile, PprofSettings{0, 10, 1.0, true, false, false, ""}, sink);
  const pb::Profile p = parse(sink.str());
  const auto by_stack = samples_by_stack(p);
  const std::string labels = " pid=7 tid=7 process_name=app thread_name=app";
  // samples, cpu, off-cpu: three timer samples with 3 ms of CPU; a wait of 2.5 intervals.
  EXPECT_EQ(by_stack.at("main;add+step+run" + labels), (std::vector<int64_t>{3, 3000000, 0}));
  EXPECT_EQ(by_stack.at("main;[sleeping]" + labels + " off_cpu_state=sleeping"),
            (std::vector<int64_t>{0, 0, 2500000}));
  ASSERT_EQ(p.mapping_size(), 1);
  EXPECT_TRUE(p.mapping(0).has_inline_frames());
  EXPECT_TRUE(p.mapping(0).has_line_numbers());
  EXPECT_EQ(p.string_table(static_cast<int>(p.mapping(0).build_id())), "abcdef0123");
  for (const pb::Location& l : p.location()) {
    if (l.line_size() != 3) continue;
    EXPECT_EQ(l.line(0).line(), 12);  // add, at depth 2
    EXPECT_EQ(l.line(2).line(), 10);  // run, its outermost caller
  }
}

// record --memory: a thread's page-fault samples are the alloc_space/bytes value of their
// stacks, beside the CPU samples' values (0 there), summed by stack.
TEST(PprofWriter, MemoryBroughtInIsAllocSpaceInBytes) {
  std::vector<ThreadSample> samples;
  std::shared_ptr<std::vector<StackIndex>> stack_of;
  BuiltProfile profile = inline_and_wait_profile(samples, stack_of);
  const std::vector<ThreadAllocation> allocations = {{MonotonicNs{2000000}, 0, 262144},
                                                     {MonotonicNs{3000000}, 0, 262144}};
  profile.threads[0].allocations = AllocationsTable(allocations, stack_of, MonotonicNs{0});
  StringSink sink;
  write_pprof(profile, PprofSettings{0, 10, 1.0, true, true, false, ""}, sink);
  const pb::Profile p = parse(sink.str());
  ASSERT_EQ(p.sample_type_size(), 4);
  EXPECT_EQ(p.string_table(static_cast<int>(p.sample_type(3).type())), "alloc_space");
  EXPECT_EQ(p.string_table(static_cast<int>(p.sample_type(3).unit())), "bytes");
  const auto by_stack = samples_by_stack(p);
  const std::string labels = " pid=7 tid=7 process_name=app thread_name=app";
  EXPECT_EQ(by_stack.at("main;add+step+run" + labels),
            (std::vector<int64_t>{3, 3000000, 0, 524288}));
  EXPECT_EQ(by_stack.at("main;[sleeping]" + labels + " off_cpu_state=sleeping"),
            (std::vector<int64_t>{0, 0, 2500000, 0}));
}

// convert reads the Firefox profile back into the same tables: the same pprof profile.
TEST(ProcessedProfileReader, ConvertGivesThePprofOfTheRecording) {
  PprofDemo demo;
  const std::unique_ptr<ReadProfile> read =
      parse_processed_profile(demo.write(OutputFormat::kFirefox));
  EXPECT_DOUBLE_EQ(read->settings.interval_ms, 1.0);
  EXPECT_FALSE(read->settings.off_cpu);
  StringSink converted;
  write_pprof(read->profile, read->settings, converted);
  const pb::Profile direct = parse(demo.write(OutputFormat::kPprof));
  const pb::Profile from_json = parse(converted.str());
  EXPECT_EQ(samples_by_stack(from_json), samples_by_stack(direct));
  ASSERT_EQ(from_json.mapping_size(), 1);
  EXPECT_EQ(from_json.string_table(static_cast<int>(from_json.mapping(0).filename())),
            "/opt/demo/demo");
  EXPECT_EQ(from_json.duration_nanos(), direct.duration_nanos());
}

// record --memory's allocations go into the Firefox profile and come back: convert's pprof
// has the recording's alloc_space.
TEST(ProcessedProfileReader, ConvertKeepsTheMemoryBroughtIn) {
  synthetic::DemoSession with_memory(true);
  StringSink firefox, pprof;
  ProfileOptions options;
  options.format = OutputFormat::kFirefox;
  write_profile_with_report(with_memory.model, with_memory.recording, firefox, options,
                            with_memory.symbolizer);
  options.format = OutputFormat::kPprof;
  write_profile_with_report(with_memory.model, with_memory.recording, pprof, options,
                            with_memory.symbolizer);
  const std::unique_ptr<ReadProfile> read = parse_processed_profile(firefox.take());
  EXPECT_TRUE(read->settings.memory);
  StringSink converted;
  write_pprof(read->profile, read->settings, converted);
  const pb::Profile direct = parse(pprof.take());
  const pb::Profile from_json = parse(converted.str());
  ASSERT_EQ(from_json.sample_type_size(), direct.sample_type_size());
  EXPECT_EQ(from_json.string_table(static_cast<int>(from_json.sample_type(2).type())),
            "alloc_space");
  const auto by_stack = samples_by_stack(from_json);
  EXPECT_EQ(by_stack, samples_by_stack(direct));
  EXPECT_EQ(from_json.string_table(static_cast<int>(from_json.sample_type(3).type())),
            "mapped_space");
  int64_t bytes = 0, mapped = 0;
  for (const auto& [stack, values] : by_stack)
    if (stack.starts_with("_start;main;compute")) {
      bytes += values[2];
      mapped += values[3];
    }
  EXPECT_EQ(bytes, 2 * static_cast<int64_t>(kPageFaultSampleBytes));
  EXPECT_EQ(mapped, sampled_block_weight(2 << 20, BPFPROF_ADDRESS_SPACE_PERIOD));
}

// A process's container: on its track's name and in processContext, as pprof labels, and
// read back by convert whole (the track's name without it).
TEST(ProcessedProfileReader, AContainerGoesToTheTrackThePprofLabelsAndBack) {
  PprofDemo demo;
  const std::string id(64, 'a');
  ProcessContext context = context_from_cgroups("0::/system.slice/docker-" + id + ".scope\n");
  context.namespace_pid = 7;
  demo.model.apply(MonotonicNs{1}, ProcessContextEvent{demo.model.processes()[0].pid, context});
  const std::string json = demo.write(OutputFormat::kFirefox);
  EXPECT_NE(json.find("\"processName\":\"demo [docker aaaaaaaaaaaa]\""), std::string::npos);
  EXPECT_NE(json.find("\"containerId\":\"" + id + "\""), std::string::npos);
  const std::unique_ptr<ReadProfile> read = parse_processed_profile(json);
  ASSERT_FALSE(read->profile.threads.empty());
  EXPECT_EQ(read->profile.threads[0].process_name, "demo");
  EXPECT_NE(json.find("\"name\":\"demo [docker aaaaaaaaaaaa]\""), std::string::npos);
  EXPECT_EQ(read->profile.threads[0].context, context);
  StringSink converted;
  write_pprof(read->profile, read->settings, converted);
  const auto direct = samples_by_stack(parse(demo.write(OutputFormat::kPprof)));
  EXPECT_EQ(samples_by_stack(parse(converted.str())), direct);
  ASSERT_FALSE(direct.empty());
  const std::string& labelled = direct.begin()->first;
  EXPECT_NE(labelled.find(" container_runtime=docker container_id=" + id), std::string::npos)
      << labelled;
  EXPECT_NE(labelled.find(" namespace_pid=7"), std::string::npos) << labelled;
}

// bpfprof run inside the same container: the tracks do not all say so; the labels still do.
TEST(ProcessedProfileReader, TheRecordersOwnContainerIsNotOnTheTracks) {
  PprofDemo demo;
  const ProcessContext context =
      context_from_cgroups("0::/system.slice/docker-" + std::string(64, 'a') + ".scope\n");
  demo.model.apply(MonotonicNs{1}, ProcessContextEvent{demo.model.processes()[0].pid, context});
  demo.recording.recorder_context = context;
  const std::string json = demo.write(OutputFormat::kFirefox);
  EXPECT_EQ(json.find("[docker"), std::string::npos);
  EXPECT_NE(json.find("\"containerRuntime\":\"docker\""), std::string::npos);
}

TEST(ProcessedProfileReader, BadInputIsOneLineNotACrash) {
  for (const char* text :
       {"", "{", "[]", "{\"meta\":{}}", "{\"meta\":{\"interval\":1},\"libs\":[],\"threads\":[]}",
        R"({"meta":{"interval":1},"libs":[],"threads":[],"shared":{"stringArray":["a"],
            "resourceTable":{"name":[]},"funcTable":{"name":[0],"resource":[-1],"isJS":[false],
            "lineNumber":[null]},"frameTable":{"func":[5],"address":[-1],"category":[0],
            "inlineDepth":[0],"line":[null]},"stackTable":{"frame":[],"prefixOffset":[]}}})"}) {
    try {
      parse_processed_profile(text);
      ADD_FAILURE() << "accepted: " << text;
    } catch (const std::runtime_error& e) {
      EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace bpfprof
