// Python frames in userspace: the 3.11 location table, str contents, interpreter file names
// and the binary checks, and the merge of Python activations into native stacks.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "runtimes/python/code.h"
#include "runtimes/python/layout.h"
#include "runtimes/python/processes.h"
#include "runtimes/python/stacks.h"
#include "symbols/util/unique_handle.h"
#include "tests/unit/test_helpers.h"

namespace bpfprof {
namespace {

using testing_helpers::from_hex;

// From python3.11 (3.11.2, Debian): a function with a multi-line expression and a loop,
//   def f(a):          # line 3
//       x = a
//       y = (x +
//            1)
//       for i in range(3):
//           y += i
//       return y
// its co_linetable, and co_lines(): (start byte, end byte, line).
TEST(PythonLineTable, MatchesCoLinesOfARealFunction) {
  const std::string table = from_hex(
      "8000d808098041d8090ad8090af103010a0b8041e50d12903189588c58f00001050ff00001050f8801d80809"
      "8851890688018801d80b0c8048");
  struct Range {
    uint32_t start, end, line;
  };
  const std::vector<Range> lines = {
      {0, 2, 3},   {2, 4, 4},   {4, 6, 4},   {6, 8, 5},   {8, 10, 6},  {10, 14, 5}, {14, 16, 5},
      {16, 28, 7}, {28, 30, 7}, {30, 34, 7}, {34, 44, 7}, {44, 46, 7}, {46, 48, 7}, {48, 50, 7},
      {50, 52, 8}, {52, 54, 8}, {54, 58, 8}, {58, 60, 8}, {60, 62, 8}, {62, 64, 9}, {64, 66, 9}};
  for (const Range& r : lines)
    for (uint32_t byte = r.start; byte < r.end; byte += 2)
      EXPECT_EQ(python_line_for(PythonLineTable::kLocations, table, 3, byte / 2), r.line)
          << "byte offset " << byte;
  EXPECT_EQ(python_line_for(PythonLineTable::kLocations, table, 3, 33), std::nullopt)
      << "past the end";
}

TEST(PythonLineTable, RejectsWhatIsNotALocationTable) {
  EXPECT_EQ(python_line_for(PythonLineTable::kLocations, std::string("\x01\x02", 2), 1, 0),
            std::nullopt);
  EXPECT_EQ(python_line_for(PythonLineTable::kLocations, "", 1, 0), std::nullopt);
  // A "no location" entry (code 15) covers its units without a line.
  EXPECT_EQ(python_line_for(PythonLineTable::kLocations, std::string("\xf8", 1), 10, 0),
            std::nullopt);
  // A no-columns entry (code 13) with line delta +2 (svarint 4), two units.
  EXPECT_EQ(python_line_for(PythonLineTable::kLocations, std::string("\xe9\x04", 2), 10, 1), 12u);
}

// The function above at line 4 (its body on 5 to 10), as pyenv's 3.8.18 and 3.10.13 compile
// it: its byte offsets and lines as dis.findlinestarts (3.8) and co_lines() (3.10) give them.
struct ByteRange {
  uint32_t start, end, line;
};
const std::vector<ByteRange> kOldFunctionLines = {{0, 4, 5},   {4, 6, 6},   {6, 8, 7},   {8, 12, 6},
                                                  {12, 24, 8}, {24, 34, 9}, {34, 38, 10}};

TEST(PythonLineTable, Python38LnotabMatchesFindlinestarts) {
  const std::string lnotab = from_hex("00010401020102ff04020c010a01");
  const auto runs = python_line_runs(PythonLineTable::kLnotab, lnotab, 4);
  for (const ByteRange& r : kOldFunctionLines)
    for (uint32_t byte = r.start; byte < r.end; byte += 2) {
      EXPECT_EQ(python_line_for(PythonLineTable::kLnotab, lnotab, 4, byte / 2), r.line) << byte;
      EXPECT_EQ(python_line_in(runs, byte / 2), r.line) << byte;
    }
  // The last line runs on: the table does not say where the code ends.
  EXPECT_EQ(python_line_for(PythonLineTable::kLnotab, lnotab, 4, 1000), 10u);
  // No table: every instruction is on the first line.
  EXPECT_EQ(python_line_for(PythonLineTable::kLnotab, "", 4, 7), 4u);
}

TEST(PythonLineTable, Python310LinetableMatchesCoLines) {
  const std::string linetable = from_hex("04010201020104ff0c020a010401");
  const auto runs = python_line_runs(PythonLineTable::kLinetable, linetable, 4);
  for (const ByteRange& r : kOldFunctionLines)
    for (uint32_t byte = r.start; byte < r.end; byte += 2) {
      EXPECT_EQ(python_line_for(PythonLineTable::kLinetable, linetable, 4, byte / 2), r.line);
      EXPECT_EQ(python_line_in(runs, byte / 2), r.line) << byte;
    }
  EXPECT_EQ(python_line_for(PythonLineTable::kLinetable, linetable, 4, 19), std::nullopt);
  // -128: a range without a line; the next range's increment counts from the line before.
  const std::string gap = from_hex("0401048002020401");
  EXPECT_EQ(python_line_for(PythonLineTable::kLinetable, gap, 4, 2), std::nullopt);
  EXPECT_EQ(python_line_for(PythonLineTable::kLinetable, gap, 4, 4), 7u);
}

TEST(PythonText, EachKindBecomesUtf8) {
  EXPECT_EQ(python_text_as_utf8("h\xe9", 1), "h\xc3\xa9");
  EXPECT_EQ(python_text_as_utf8(std::string("\xac\x20", 2), 2), "\xe2\x82\xac");  // U+20AC
  EXPECT_EQ(python_text_as_utf8(std::string("\x00\xf6\x01\x00", 4), 4),
            "\xf0\x9f\x98\x80");                                                  // U+1F600
  EXPECT_EQ(python_text_as_utf8(std::string("\x00\xd8", 2), 2), "\xef\xbf\xbd");  // a surrogate
}

TEST(PythonFileNames, OnlyInterpreterNamesGiveAVersion) {
  EXPECT_EQ(python_version_from_file_name("python3.11"), (PythonVersion{3, 11}));
  EXPECT_EQ(python_version_from_file_name("libpython3.11.so.1.0"), (PythonVersion{3, 11}));
  EXPECT_EQ(python_version_from_file_name("libpython3.13.so"), (PythonVersion{3, 13}));
  EXPECT_EQ(python_version_from_file_name("python3"), std::nullopt);
  EXPECT_EQ(python_version_from_file_name("python3.11-config"), std::nullopt);
  EXPECT_EQ(python_version_from_file_name("python3.11d"), std::nullopt);
  EXPECT_EQ(python_version_from_file_name("libpython3.11d.so.1.0"), std::nullopt);
  EXPECT_EQ(python_version_from_file_name("bash"), std::nullopt);
  // Up to 3.7 a pymalloc build says so in its name ("m"), with the usual layout.
  EXPECT_EQ(python_version_from_file_name("libpython3.7m.so.1.0"), (PythonVersion{3, 7}));
  EXPECT_EQ(python_version_from_file_name("python3.7m"), (PythonVersion{3, 7}));
  EXPECT_EQ(python_version_from_file_name("libpython3.8m.so.1.0"), std::nullopt);
  EXPECT_EQ(python_version_from_file_name("libpython3.7dm.so.1.0"), std::nullopt);
}

TEST(PythonBinary, AProgramNamedLikePythonIsRejectedWithAReason) {
  auto result = inspect_python_binary("/bin/true", PythonVersion{3, 11});
  ASSERT_TRUE(std::holds_alternative<PythonRejection>(result));
  EXPECT_NE(std::get<PythonRejection>(result).reason.find("not a CPython interpreter"),
            std::string::npos);
  auto unknown = inspect_python_binary("/bin/true", PythonVersion{2, 7});
  ASSERT_TRUE(std::holds_alternative<PythonRejection>(unknown));
  EXPECT_NE(std::get<PythonRejection>(unknown).reason.find("frames not read"), std::string::npos);
}

TEST(PythonBinary, DebiansPython311IsAccepted) {
  if (access("/usr/bin/python3.11", R_OK) != 0) GTEST_SKIP() << "no /usr/bin/python3.11";
  auto result = inspect_python_binary("/usr/bin/python3.11", PythonVersion{3, 11});
  ASSERT_TRUE(std::holds_alternative<PythonBinary>(result))
      << std::get<PythonRejection>(result).reason;
  const PythonBinary& b = std::get<PythonBinary>(result);
  EXPECT_EQ(b.layout, python_layout(PythonVersion{3, 11}));
  EXPECT_NE(b.runtime, 0u);
  EXPECT_GT(b.eval_size, 1000u);
  EXPECT_NE(b.str_type, 0u) << "PyUnicode_Type";
  EXPECT_NE(b.bytes_type, 0u) << "PyBytes_Type";
}

// pyenv's 3.6 has no _PyRuntime: the interpreters' list is interp_head, found in the code of
// PyInterpreterState_Head (nm shows the static at 0x2feee0); its launcher is told apart.
TEST(PythonBinary, Python36sInterpreterListIsFoundFromItsCode) {
  const char* library = "/root/.pyenv/versions/3.6.15/lib/libpython3.6m.so.1.0";
  if (access(library, R_OK) != 0) GTEST_SKIP() << "no " << library;
  auto result = inspect_python_binary(library, PythonVersion{3, 6});
  ASSERT_TRUE(std::holds_alternative<PythonBinary>(result))
      << std::get<PythonRejection>(result).reason;
  EXPECT_EQ(std::get<PythonBinary>(result).runtime, 0x2feee0u);
  EXPECT_TRUE(std::holds_alternative<PythonLauncher>(
      inspect_python_binary("/root/.pyenv/versions/3.6.15/bin/python3.6", PythonVersion{3, 6})));
}

constexpr uint64_t kEval = 0x5000;  // a native _PyEval_EvalFrameDefault frame
bool is_eval(uint64_t pc) { return pc == kEval; }
uint64_t py(uint32_t id) { return raw_runtime_frame(RuntimeFrameId{id}); }

TEST(PythonMerge, EachActivationReplacesItsInterpreterFrame) {
  // Innermost first: a C function called from Python (0x10), the inner activation, a native
  // call in between (0x20: e.g. _PyFunction_Vectorcall), the outer activation, main (0x30).
  const std::vector<uint64_t> native = {0x10, kEval, 0x20, kEval, 0x30};
  const std::vector<ActivationFrame> python = {
      {py(1), false}, {py(2), true}, {py(3), false}, {py(4), true}};
  const MergedStack merged =
      merge_runtime_frames(native, python, is_eval, ActivationMatch::kFromInnermost);
  EXPECT_EQ(merged.frames, (std::vector<uint64_t>{0x10, py(1), py(2), 0x20, py(3), py(4), 0x30}));
  EXPECT_EQ(merged.runtime_frames, 4u);
  EXPECT_FALSE(merged.mismatched);
}

TEST(PythonMerge, DisagreementsAreFlaggedAndNothingIsInvented) {
  // More interpreter frames than activations: the extra one stays native.
  const std::vector<uint64_t> native = {kEval, 0x20, kEval};
  const std::vector<ActivationFrame> one = {{py(1), true}};
  MergedStack merged = merge_runtime_frames(native, one, is_eval, ActivationMatch::kFromInnermost);
  EXPECT_EQ(merged.frames, (std::vector<uint64_t>{py(1), 0x20, kEval}));
  EXPECT_TRUE(merged.mismatched);
  // Activations left over (the native stack was cut short): dropped.
  const std::vector<uint64_t> cut = {0x10, kEval};
  const std::vector<ActivationFrame> two = {{py(1), true}, {py(2), true}};
  merged = merge_runtime_frames(cut, two, is_eval, ActivationMatch::kFromInnermost);
  EXPECT_EQ(merged.frames, (std::vector<uint64_t>{0x10, py(1)}));
  EXPECT_TRUE(merged.mismatched);
  // No Python frames: the stack is as it was.
  merged = merge_runtime_frames(native, {}, is_eval, ActivationMatch::kFromInnermost);
  EXPECT_EQ(merged.frames, native);
}

// A C function (list.sort) calls a Python key function, which is returning: its interpreter
// frame runs no Python frame any more (3.12+: a shim frame innermost). The caller's activation
// belongs to the outer interpreter frame, not to the innermost one.
TEST(PythonMerge, AnInnermostInterpreterFrameWithoutFramesStaysNative) {
  const std::vector<uint64_t> native = {0x10, kEval, 0x20, kEval, 0x30};
  const std::vector<ActivationFrame> caller = {{py(1), false}, {py(2), true}};
  MergedStack merged =
      merge_runtime_frames(native, caller, is_eval, ActivationMatch::kFromInnermost, true);
  EXPECT_EQ(merged.frames, (std::vector<uint64_t>{0x10, kEval, 0x20, py(1), py(2), 0x30}));
  EXPECT_FALSE(merged.mismatched);
  // Not said so, the caller's frames go to the innermost loop and the outer one stays native.
  merged = merge_runtime_frames(native, caller, is_eval, ActivationMatch::kFromInnermost);
  EXPECT_EQ(merged.frames, (std::vector<uint64_t>{0x10, py(1), py(2), 0x20, kEval, 0x30}));
  EXPECT_TRUE(merged.mismatched);
}

TEST(RuntimeFrameTable, InternsFunctionsAndLinesOnceAndTellsRawFramesApart) {
  RuntimeFrameTable table;
  const RuntimeFunction f{"Grove.tend", "/x/call_tree.py", 42};
  const RuntimeFrameId a = table.intern(f, 43);
  EXPECT_EQ(table.intern(f, 43), a);
  const RuntimeFrameId b = table.intern(f, 44);
  EXPECT_NE(a, b);
  EXPECT_EQ(table.function_of(a), table.function_of(b));
  EXPECT_EQ(table.frame(b).line, 44u);
  EXPECT_EQ(runtime_frame_of(raw_runtime_frame(b)), b);
  EXPECT_FALSE(is_user_address(raw_runtime_frame(b)));
  EXPECT_FALSE(is_kernel_address(raw_runtime_frame(b)));
  EXPECT_EQ(runtime_frame_of(0x7fff12345678ull), std::nullopt);
  EXPECT_EQ(runtime_frame_of(0xffffffff81000000ull), std::nullopt);
}

// A provisional function (read while V8's collector moved its script) that no reread completed
// takes the first line of the one function of its name and file read with one; where two such
// differ (two "(anonymous)" in one file), it stays without.
TEST(RuntimeFrameTable, SettlesFirstLinesThatOnlyOneFunctionCouldHave) {
  RuntimeFrameTable table;
  const RuntimeFrameId provisional =
      table.intern_provisional({"sortWork", "/x/work.js", 0, RuntimeKind::kV8});
  const RuntimeFrameId at_line = table.intern({"sortWork", "/x/work.js", 0, RuntimeKind::kV8}, 12);
  table.intern({"sortWork", "/x/work.js", 10, RuntimeKind::kV8}, 11);
  const RuntimeFrameId anonymous =
      table.intern_provisional({"(anonymous)", "/x/work.js", 0, RuntimeKind::kV8});
  table.intern({"(anonymous)", "/x/work.js", 20, RuntimeKind::kV8}, 20);
  table.intern({"(anonymous)", "/x/work.js", 30, RuntimeKind::kV8}, 30);
  const RuntimeFrameId elsewhere =
      table.intern_provisional({"sortWork", "/x/other.js", 0, RuntimeKind::kV8});
  table.settle_first_lines();
  EXPECT_EQ(table.function_of(provisional).first_line, 10u);
  EXPECT_EQ(table.function_of(at_line).first_line, 10u);
  EXPECT_EQ(table.frame(at_line).line, 12u);  // the current line is the frame's own
  EXPECT_EQ(table.function_of(anonymous).first_line, 0u);
  EXPECT_EQ(table.function_of(elsewhere).first_line, 0u);
}

}  // namespace
}  // namespace bpfprof

namespace bpfprof {
namespace {

// The side band reports every process's mappings: a python3.X of a process that is not
// recorded gets no entry (another user's programs must not fill the kernel's table), until
// the process becomes known (its exec came after the mapping).
TEST(PythonProcesses, OnlyRecordedProcessesGetAnInterpreter) {
  if (access("/usr/bin/python3.11", R_OK) != 0) GTEST_SKIP() << "no /usr/bin/python3.11";
  Recording recording;
  MappingInfo text{.start = 0x41f000, .length = 0x2b3000, .file_offset = 0x1f000};
  text.path = "/usr/bin/python3.11";
  const Pid stranger{4242};
  const Pid ours{4343};
  recording.events.push_back({MonotonicNs{1}, MmapEvent{stranger, Tid{4242}, text}});
  recording.events.push_back({MonotonicNs{2}, MmapEvent{ours, Tid{4343}, text}});
  recording.events.push_back(
      {MonotonicNs{3}, ExecEvent{ours, Tid{4343}, Tid{4343}, "python3.11", text.path}});
  PythonProcesses processes;
  processes.observe(recording.events, 0, recording.stats.runtimes[RuntimeKind::kPython]);
  EXPECT_EQ(processes.find(stranger), nullptr);
  EXPECT_NE(processes.find(ours), nullptr);
  const auto changes = processes.take_changes();
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].pid, ours);
}

// The decoder's path: a Python-stack event (3.12-style shim frames) for a registered
// interpreter, then the sample's native stack. The code objects cannot be read (made-up
// addresses in this process), so every frame is "[unknown Python code]": what is checked is
// where they go and that they are counted.
TEST(PythonStacks, ShimFramesSplitActivationsAndUnreadableCodeIsCounted) {
  if (access("/usr/bin/python3.11", R_OK) != 0) GTEST_SKIP() << "no /usr/bin/python3.11";
  Recording recording;
  const Pid pid{static_cast<int32_t>(getpid())};
  MappingInfo text{.start = 0x41f000, .length = 0x2b3000, .file_offset = 0x1f000};
  text.path = "/usr/bin/python3.11";
  recording.events.push_back({MonotonicNs{1}, ProcessStartEvent{pid, "python3.11"}});
  recording.events.push_back({MonotonicNs{1}, MmapEvent{pid, Tid{pid.value}, text}});
  PythonProcesses processes;
  processes.observe(recording.events, 0, recording.stats.runtimes[RuntimeKind::kPython]);
  const PythonInterpreter* interpreter = processes.find(pid);
  ASSERT_NE(interpreter, nullptr);
  ASSERT_EQ(processes.take_changes().size(), 1u);

  bpfprof_python_stack_event e{};
  e.header = {BPFPROF_EVENT_PYTHON_STACK, 0, 1000, static_cast<__u32>(pid.value), 77};
  const uint64_t codes[] = {0x1000, 0x2000, 0, 0x3000, 0};  // 0: a shim frame
  for (const uint64_t code : codes) {
    e.frames[e.depth].code = code ? code : 0x9000;
    e.frames[e.depth++].flags = code ? 0 : BPFPROF_PYTHON_FRAME_SHIM;
  }
  PythonStacks stacks(processes);
  stacks.take_event(&e, offsetof(bpfprof_python_stack_event, frames) + 5 * sizeof(e.frames[0]),
                    recording.stats.runtimes[RuntimeKind::kPython]);
  const uint64_t eval = interpreter->eval_start + 16;
  std::vector<uint64_t> user = {0x10, eval, 0x20, eval, 0x30};
  stacks.merge_into(pid, Tid{77}, MonotonicNs{1000}, user, recording);
  ASSERT_EQ(user.size(), 6u);
  const auto unknown = runtime_frame_of(user[1]);
  ASSERT_TRUE(unknown.has_value());
  EXPECT_EQ(recording.runtime_frames.function_of(*unknown).qualified_name, "[unknown Python code]");
  EXPECT_EQ(user, (std::vector<uint64_t>{0x10, user[1], user[1], 0x20, user[1], 0x30}));
  EXPECT_EQ(recording.stats.runtimes[RuntimeKind::kPython].stacks, 1u);
  EXPECT_EQ(recording.stats.runtimes[RuntimeKind::kPython].merged, 1u);
  EXPECT_EQ(recording.stats.runtimes[RuntimeKind::kPython].unnamed_frames, 3u);
  EXPECT_EQ(recording.stats.runtimes[RuntimeKind::kPython].mismatched, 0u);
  // A shim frame first: the innermost interpreter frame's activation has no frame.
  bpfprof_python_stack_event returning = e;
  returning.header.timestamp_ns = 1500;
  returning.depth = 0;
  for (const uint64_t code : {uint64_t{0}, uint64_t{0x1000}, uint64_t{0}}) {
    returning.frames[returning.depth].code = code ? code : 0x9000;
    returning.frames[returning.depth++].flags = code ? 0 : BPFPROF_PYTHON_FRAME_SHIM;
  }
  stacks.take_event(&returning, sizeof(returning), recording.stats.runtimes[RuntimeKind::kPython]);
  std::vector<uint64_t> exiting = {0x10, eval, 0x20, eval};
  stacks.merge_into(pid, Tid{77}, MonotonicNs{1500}, exiting, recording);
  EXPECT_EQ(exiting, (std::vector<uint64_t>{0x10, eval, 0x20, user[1]}));
  EXPECT_EQ(recording.stats.runtimes[RuntimeKind::kPython].mismatched, 0u);
  // A sample of another time does not take these frames.
  stacks.take_event(&e, sizeof(e), recording.stats.runtimes[RuntimeKind::kPython]);
  std::vector<uint64_t> later = {0x10, eval};
  stacks.merge_into(pid, Tid{77}, MonotonicNs{2000}, later, recording);
  EXPECT_EQ(later, (std::vector<uint64_t>{0x10, eval}));
}

}  // namespace
}  // namespace bpfprof

namespace bpfprof {
namespace {

// 3.13 states its offsets in _Py_DebugOffsets: the table entry must agree, and a table that
// does not is caught at attach time.
TEST(PythonBinary, DebugOffsetsOf313AreCheckedAgainstTheTable) {
  const std::string lib = "/root/.pyenv/versions/3.13.0/lib/libpython3.13.so.1.0";
  if (access(lib.c_str(), R_OK) != 0) GTEST_SKIP() << "no " << lib;
  auto result = inspect_python_binary(lib, PythonVersion{3, 13});
  ASSERT_TRUE(std::holds_alternative<PythonBinary>(result))
      << std::get<PythonRejection>(result).reason;
  const PythonBinary& binary = std::get<PythonBinary>(result);
  UniqueFd fd(open(lib.c_str(), O_RDONLY | O_CLOEXEC));
  PythonLayout wrong = *binary.layout;
  wrong.thread_native_id += 8;
  const auto rejected = check_debug_offsets(fd.get(), *binary.elf, binary.runtime, wrong);
  ASSERT_TRUE(rejected.has_value());
  EXPECT_NE(rejected->reason.find("thread_state.native_thread_id is at 160"), std::string::npos)
      << rejected->reason;
  EXPECT_FALSE(check_debug_offsets(fd.get(), *binary.elf, binary.runtime, kPython311).has_value())
      << "3.11 states nothing";
}

}  // namespace
}  // namespace bpfprof
