// Naming code objects from memory their process controls: code objects, str and bytes objects
// are made in this test's own memory (read back with process_vm_readv, as from a profiled
// process), well-formed or not. Whatever they hold, reading ends in a name or in an
// "[unknown ...]" frame, within the budgets of runtimes/python/code.h.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "runtimes/python/code.h"
#include "runtimes/python/layout.h"
#include "runtimes/python/processes.h"
#include "runtimes/python/stacks.h"
#include "tests/unit/test_helpers.h"

namespace bpfprof {
namespace {

using testing_helpers::from_hex;

const Pid kSelf{static_cast<int32_t>(getpid())};
constexpr MonotonicNs kStart{1'000'000'000};

MonotonicNs after_ms(uint64_t ms) { return MonotonicNs{kStart.value + ms * 1'000'000}; }

// CPython 3.11 objects, laid out as kPython311 says, in this process's memory.
class FakeObjects {
 public:
  explicit FakeObjects(const PythonInterpreter& interpreter) : i_(interpreter) {}

  // A compact ASCII str.
  uint64_t str(const std::string& text, uint64_t stated_length = ~uint64_t{0}) {
    const PythonLayout& l = *i_.layout;
    uint8_t* o = block(l.str_ascii_data + text.size() + 1);
    put(o, l.object_type, i_.str_type);
    put(o, l.str_length, stated_length == ~uint64_t{0} ? text.size() : stated_length);
    put<uint32_t>(o, l.str_state, 1u << 2 | 1u << 5 | 1u << 6);  // kind 1, compact, ascii
    memcpy(o + l.str_ascii_data, text.data(), text.size());
    return address(o);
  }
  uint64_t bytes(const std::string& data) {
    const PythonLayout& l = *i_.layout;
    uint8_t* o = block(l.bytes_data + data.size() + 1);
    put(o, l.object_type, i_.bytes_type);
    put<uint64_t>(o, l.bytes_size, data.size());
    memcpy(o + l.bytes_data, data.data(), data.size());
    return address(o);
  }
  uint64_t code(uint64_t name, uint64_t file, uint64_t table, int32_t first_line) {
    const PythonLayout& l = *i_.layout;
    uint8_t* o = block(l.code_instructions + 64);
    put(o, l.object_type, i_.code_type);
    put(o, l.code_first_line, first_line);
    put(o, l.code_filename, file);
    put(o, l.code_qualname, name);
    put(o, l.code_linetable, table);
    return address(o);
  }
  uint64_t code(const std::string& name, int32_t first_line = 1,
                const std::string& table = std::string("\x80\x00", 2)) {
    return code(str(name), str("/fake/module.py"), bytes(table), first_line);
  }
  // Readable bytes that are no object.
  uint64_t garbage(size_t size) {
    uint8_t* o = block(size);
    for (size_t i = 0; i < size; ++i) o[i] = static_cast<uint8_t>(0xa5 ^ i);
    return address(o);
  }

  template <typename T>
  static void put(uint8_t* object, uint32_t offset, T value) {
    memcpy(object + offset, &value, sizeof(value));
  }
  static uint8_t* at(uint64_t address) { return reinterpret_cast<uint8_t*>(address); }

 private:
  uint8_t* block(size_t size) {
    blocks_.push_back(std::make_unique<uint8_t[]>(size));
    memset(blocks_.back().get(), 0, size);
    return blocks_.back().get();
  }
  static uint64_t address(const uint8_t* p) { return reinterpret_cast<uint64_t>(p); }

  const PythonInterpreter& i_;
  std::vector<std::unique_ptr<uint8_t[]>> blocks_;
};

// Type objects stand in for PyCode_Type, PyUnicode_Type and PyBytes_Type: only their
// addresses count.
uint8_t code_type_object[8], str_type_object[8], bytes_type_object[8];
PythonInterpreter fake_interpreter() {
  PythonInterpreter i;
  i.layout = &kPython311;
  i.code_type = reinterpret_cast<uint64_t>(code_type_object);
  i.str_type = reinterpret_cast<uint64_t>(str_type_object);
  i.bytes_type = reinterpret_cast<uint64_t>(bytes_type_object);
  return i;
}

TEST(PythonCodeReader, NamesAWellFormedCodeObjectWithItsLines) {
  const PythonInterpreter interpreter = fake_interpreter();
  FakeObjects objects(interpreter);
  // Two units on line 10, then (code 13, +2) two on line 12.
  const uint64_t code = objects.code("Orchard.tend", 10, std::string("\x81\x00\xe9\x04", 4));
  PythonCodeReader reader;
  const PythonCodeResult read = reader.read(kSelf, interpreter, code, 10, kStart);
  ASSERT_EQ(read.status, PythonCodeStatus::kRead);
  EXPECT_EQ(read.code->qualified_name, "Orchard.tend");
  EXPECT_EQ(read.code->filename, "/fake/module.py");
  EXPECT_EQ(python_line_in(read.code->lines, 1), 10u);
  EXPECT_EQ(python_line_in(read.code->lines, 3), 12u);
  EXPECT_EQ(python_line_in(read.code->lines, 4), std::nullopt);
  EXPECT_EQ(reader.objects_read(), 1u);
  EXPECT_EQ(reader.read(kSelf, interpreter, code, 10, kStart).code, read.code) << "kept";
  EXPECT_EQ(reader.objects_read(), 1u);
}

TEST(PythonCodeReader, GarbageIsUnreadableNeverANameFromIt) {
  const PythonInterpreter interpreter = fake_interpreter();
  FakeObjects objects(interpreter);
  const uint64_t name = objects.str("f");
  const uint64_t file = objects.str("/f.py");
  const uint64_t table = objects.bytes("");
  const uint64_t garbage = objects.garbage(4096);
  const uint64_t unmapped = 0x10;
  // Each code object is wrong in one way.
  std::vector<std::pair<const char*, uint64_t>> cases = {
      {"no object at all", unmapped},
      {"bytes that are no object", garbage},
      {"a str where a code object should be", name},
      {"qualname unmapped", objects.code(unmapped, file, table, 1)},
      {"filename into garbage", objects.code(name, garbage, table, 1)},
      {"qualname is a code object", objects.code(objects.code("g"), file, table, 1)},
      {"qualname is bytes", objects.code(objects.bytes("GARBAGE"), file, table, 1)},
      {"qualname says 2^62 code points",
       objects.code(objects.str("GARBAGE", uint64_t{1} << 62), file, table, 1)},
      {"qualname a pointer to the top of the address space",
       objects.code(~uint64_t{0} - 8, file, table, 1)},
  };
  // A well-formed str of another type.
  const uint64_t not_str = objects.str("GARBAGE");
  FakeObjects::put(FakeObjects::at(not_str), kPython311.object_type, interpreter.bytes_type);
  cases.push_back({"qualname of another type", objects.code(not_str, file, table, 1)});
  // A str said to be ASCII that is not: its bytes would be no UTF-8 in the profile.
  cases.push_back(
      {"ascii str with a byte above 127", objects.code(objects.str("caf\xe9"), file, table, 1)});
  // A str whose state bits say ASCII but two bytes per code point.
  const uint64_t wide_ascii = objects.str("GARBAGE");
  FakeObjects::put<uint32_t>(FakeObjects::at(wide_ascii), kPython311.str_state,
                             2u << 2 | 1u << 5 | 1u << 6);
  cases.push_back({"ascii str of kind 2", objects.code(wide_ascii, file, table, 1)});
  PythonCodeReader reader;
  for (const auto& [what, address] : cases) {
    const PythonCodeResult read = reader.read(kSelf, interpreter, address, 1, kStart);
    EXPECT_EQ(read.status, PythonCodeStatus::kUnreadable) << what;
    EXPECT_EQ(read.code, nullptr) << what;
  }
  // A location table that says it is huge, or is garbage: named, without lines.
  std::string wild_table(64, '\x7f');
  const uint64_t no_table = objects.code(name, file, objects.bytes(wild_table), 5);
  const PythonCodeResult read = reader.read(kSelf, interpreter, no_table, 5, kStart);
  ASSERT_EQ(read.status, PythonCodeStatus::kRead);
  EXPECT_EQ(python_line_in(read.code->lines, 0), std::nullopt);
  const uint64_t huge_table = objects.bytes("");
  FakeObjects::put<uint64_t>(FakeObjects::at(huge_table), kPython311.bytes_size, uint64_t{1} << 40);
  ASSERT_EQ(
      reader.read(kSelf, interpreter, objects.code(name, file, huge_table, 5), 5, kStart).status,
      PythonCodeStatus::kRead);
  // A table of lines in an object that is not bytes: named, without lines.
  const uint64_t str_table = objects.str(std::string("\x80\x00", 2));
  const PythonCodeResult no_lines =
      reader.read(kSelf, interpreter, objects.code(name, file, str_table, 5), 5, kStart);
  ASSERT_EQ(no_lines.status, PythonCodeStatus::kRead);
  EXPECT_EQ(python_line_in(no_lines.code->lines, 0), std::nullopt);
}

TEST(PythonCodeReader, AFailedAddressIsNotReadAgainForAWhile) {
  const PythonInterpreter interpreter = fake_interpreter();
  FakeObjects objects(interpreter);
  const uint64_t code = objects.code("later", 3);
  // Not a code object yet.
  FakeObjects::put<uint64_t>(FakeObjects::at(code), kPython311.object_type, 0);
  PythonCodeReader reader;
  EXPECT_EQ(reader.read(kSelf, interpreter, code, 3, kStart).status, PythonCodeStatus::kUnreadable);
  EXPECT_EQ(reader.objects_read(), 1u);
  FakeObjects::put(FakeObjects::at(code), kPython311.object_type, interpreter.code_type);
  EXPECT_EQ(reader.read(kSelf, interpreter, code, 3, after_ms(200)).status,
            PythonCodeStatus::kUnreadable);
  EXPECT_EQ(reader.objects_read(), 1u) << "read again at the next sample";
  EXPECT_EQ(reader.read(kSelf, interpreter, code, 3, after_ms(251)).status, PythonCodeStatus::kRead)
      << "a later object at the address is read";
  EXPECT_EQ(reader.objects_read(), 2u);
}

// A frame read while its code object was freed or incomplete names it with another first
// line than the frames after: those read it at once.
TEST(PythonCodeReader, AFailedAddressNamedWithAnotherFirstLineIsReadAtOnce) {
  const PythonInterpreter interpreter = fake_interpreter();
  FakeObjects objects(interpreter);
  const uint64_t code = objects.code("complete", 3);
  FakeObjects::put<uint64_t>(FakeObjects::at(code), kPython311.object_type, 0);
  PythonCodeReader reader;
  EXPECT_EQ(reader.read(kSelf, interpreter, code, 0, kStart).status, PythonCodeStatus::kUnreadable);
  FakeObjects::put(FakeObjects::at(code), kPython311.object_type, interpreter.code_type);
  EXPECT_EQ(reader.read(kSelf, interpreter, code, 3, after_ms(1)).status, PythonCodeStatus::kRead);
  EXPECT_EQ(reader.objects_read(), 2u);
}

TEST(PythonCodeReader, TheFailedAddressesKeptAreBounded) {
  const PythonInterpreter interpreter = fake_interpreter();
  FakeObjects objects(interpreter);
  const uint64_t garbage = objects.garbage(4096);
  PythonReadLimits limits;
  limits.failed_addresses_per_process = 4;
  PythonCodeReader reader(limits);
  for (uint64_t i = 0; i < 4; ++i) reader.read(kSelf, interpreter, garbage + 8 * i, 1, kStart);
  EXPECT_EQ(reader.objects_read(), 4u);
  reader.read(kSelf, interpreter, garbage, 1, kStart);
  EXPECT_EQ(reader.objects_read(), 4u) << "remembered";
  reader.read(kSelf, interpreter, garbage + 32, 1, kStart);  // a fifth: the set is full
  reader.read(kSelf, interpreter, garbage, 1, kStart);
  EXPECT_EQ(reader.objects_read(), 6u) << "the first was forgotten";
}

TEST(PythonCodeReader, AProcessGetsAFixedNumberOfCodeObjects) {
  const PythonInterpreter interpreter = fake_interpreter();
  FakeObjects objects(interpreter);
  PythonReadLimits limits;
  limits.objects_per_process = 3;
  PythonCodeReader reader(limits);
  const uint64_t garbage = objects.garbage(64);
  const uint64_t a = objects.code("a"), b = objects.code("b"), c = objects.code("c");
  EXPECT_EQ(reader.read(kSelf, interpreter, a, 1, kStart).status, PythonCodeStatus::kRead);
  EXPECT_EQ(reader.read(kSelf, interpreter, garbage, 1, kStart).status,
            PythonCodeStatus::kUnreadable)
      << "a failed read counts too";
  EXPECT_EQ(reader.read(kSelf, interpreter, b, 1, kStart).status, PythonCodeStatus::kRead);
  EXPECT_EQ(reader.processes_over_budget(), 0u);
  EXPECT_EQ(reader.read(kSelf, interpreter, c, 1, kStart).status,
            PythonCodeStatus::kProcessBudgetUsedUp);
  EXPECT_EQ(reader.processes_over_budget(), 1u);
  EXPECT_EQ(reader.read(kSelf, interpreter, c, 1, after_ms(5000)).status,
            PythonCodeStatus::kProcessBudgetUsedUp);
  EXPECT_EQ(reader.processes_over_budget(), 1u) << "counted once";
  EXPECT_EQ(reader.read(kSelf, interpreter, a, 1, kStart).status, PythonCodeStatus::kRead)
      << "what was read is still named";
  EXPECT_EQ(reader.objects_read(), 3u);
  reader.forget(kSelf);  // a new process at that pid starts with a full budget
  EXPECT_EQ(reader.read(kSelf, interpreter, c, 1, kStart).status, PythonCodeStatus::kRead);
}

TEST(PythonCodeReader, AProcessGetsAFixedNumberOfBytes) {
  const PythonInterpreter interpreter = fake_interpreter();
  FakeObjects objects(interpreter);
  PythonReadLimits limits;
  limits.bytes_per_process = 100 << 10;
  PythonCodeReader reader(limits);
  // A 60 KiB location table of "no location" entries (one run), shared by three functions.
  const uint64_t table = objects.bytes(std::string(60 << 10, '\xf8'));
  const uint64_t name = objects.str("big"), file = objects.str("/big.py");
  const uint64_t a = objects.code(name, file, table, 1), b = objects.code(name, file, table, 1),
                 c = objects.code(name, file, table, 1);
  EXPECT_EQ(reader.read(kSelf, interpreter, a, 1, kStart).status, PythonCodeStatus::kRead);
  EXPECT_EQ(reader.read(kSelf, interpreter, b, 1, kStart).status, PythonCodeStatus::kRead);
  EXPECT_EQ(reader.read(kSelf, interpreter, c, 1, kStart).status,
            PythonCodeStatus::kProcessBudgetUsedUp);
}

TEST(PythonCodeReader, ASampleGetsAFixedNumberOfBytes) {
  const PythonInterpreter interpreter = fake_interpreter();
  FakeObjects objects(interpreter);
  PythonReadLimits limits;
  limits.bytes_per_sample = 100 << 10;
  PythonCodeReader reader(limits);
  const uint64_t table = objects.bytes(std::string(60 << 10, '\xf8'));
  const uint64_t name = objects.str("big"), file = objects.str("/big.py");
  const uint64_t a = objects.code(name, file, table, 1), b = objects.code(name, file, table, 1),
                 c = objects.code(name, file, table, 1);
  reader.start_sample();
  EXPECT_EQ(reader.read(kSelf, interpreter, a, 1, kStart).status, PythonCodeStatus::kRead);
  EXPECT_EQ(reader.read(kSelf, interpreter, b, 1, kStart).status, PythonCodeStatus::kRead);
  EXPECT_EQ(reader.read(kSelf, interpreter, c, 1, kStart).status,
            PythonCodeStatus::kSampleBudgetUsedUp);
  EXPECT_EQ(reader.read(kSelf, interpreter, a, 1, kStart).status, PythonCodeStatus::kRead)
      << "kept objects cost nothing";
  reader.start_sample();
  EXPECT_EQ(reader.read(kSelf, interpreter, c, 1, after_ms(1)).status, PythonCodeStatus::kRead)
      << "named at the next sample";
}

TEST(PythonLineRuns, AgreeWithTheTableAtEveryUnit) {
  // The real 3.11 table of python_frames_test.cpp, a table cut in its last entry, garbage
  // after valid entries, and one that is all "no location".
  const std::vector<std::string> tables = {
      from_hex("8000d808098041d8090ad8090af103010a0b8041e50d12903189588c58f00001050ff00001050f88"
               "01d808098851890688018801d80b0c8048"),
      std::string("\xf0\x01\x02", 3),
      std::string("\x80\x00\xe9\x04\x01\x02\x03", 7),
      std::string(100, '\xf8'),
      // Five times a line 2^30 further: beyond 32 bits.
      from_hex("e97e7f7f7f7f01e97e7f7f7f7f01e97e7f7f7f7f01e97e7f7f7f7f01e97e7f7f7f7f01"),
      std::string(),
  };
  for (const std::string& table : tables) {
    const std::vector<PythonLineRun> runs = python_line_runs(PythonLineTable::kLocations, table, 3);
    for (uint32_t unit = 0; unit < 8 * table.size() + 4; ++unit)
      EXPECT_EQ(python_line_in(runs, unit),
                python_line_for(PythonLineTable::kLocations, table, 3, unit))
          << unit;
  }
  // 100 "no location" entries: one run, however long the table.
  EXPECT_EQ(python_line_runs(PythonLineTable::kLocations, std::string(100, '\xf8'), 1).size(), 1u);
}

TEST(PythonLineRuns, AFrameInItsPrologueIsOnTheFunctionsFirstLine) {
  // Python 3.13's table of a closure `def medlar():` on line 3 whose body is line 4:
  // COPY_FREE_VARS (no location), RESUME (line 3), then line 4.
  const std::string table = from_hex("f88000dc0f1690719827d30f22d00822");
  const std::vector<PythonLineRun> runs = python_line_runs(PythonLineTable::kLocations, table, 3);
  EXPECT_EQ(python_line_in(runs, 0), 3u) << "a frame that has not run its first instruction";
  EXPECT_EQ(python_line_in(runs, 1), 3u);
  EXPECT_EQ(python_line_in(runs, 2), 4u);
  EXPECT_EQ(python_line_for(PythonLineTable::kLocations, table, 3, 0), 3u);
  // Past the prologue an instruction without a location has no line (an except's cleanup).
  const std::string cleanup = from_hex("8000f8");
  EXPECT_EQ(python_line_for(PythonLineTable::kLocations, cleanup, 3, 0), 3u);
  EXPECT_EQ(python_line_for(PythonLineTable::kLocations, cleanup, 3, 1), std::nullopt);
}

TEST(PythonText, KindsThatNoStrHasGiveNothing) {
  EXPECT_EQ(python_text_as_utf8("abcd", 0), "");
  EXPECT_EQ(python_text_as_utf8("abcdef", 3), "");
  EXPECT_EQ(python_text_as_utf8("abcdefgh", 8), "");
  EXPECT_EQ(python_text_as_utf8("abcd", -1), "");
}

// Through PythonStacks, as the decoder calls it: an interpreter registered for this process
// (Debian's python3.11 mapped at a made-up address), frames whose code objects live here.
class PythonStacksBudget : public testing::Test {
 protected:
  void SetUp() override {
    MappingInfo text{.start = 0x41f000, .length = 0x2b3000, .file_offset = 0x1f000};
    text.path = "/usr/bin/python3.11";
    start_interpreter(text);
  }
  // The interpreter whose code `text` maps (skipped when that file is not here).
  void start_interpreter(const MappingInfo& text) {
    if (access(text.path.c_str(), R_OK) != 0) GTEST_SKIP() << "no " << text.path;
    recording_.events.push_back({MonotonicNs{1}, ProcessStartEvent{kSelf, "python3"}});
    recording_.events.push_back({MonotonicNs{1}, MmapEvent{kSelf, Tid{kSelf.value}, text}});
    processes_.observe(recording_.events, 0, recording_.stats.runtimes[RuntimeKind::kPython]);
    interpreter_ = processes_.find(kSelf);
    ASSERT_NE(interpreter_, nullptr);
  }
  // One sample at `time_ns` whose Python frames run `codes` (innermost first) at
  // `instruction`, in one activation; its merged Python frames' names.
  std::vector<std::string> sample(PythonStacks& stacks, uint64_t time_ns,
                                  const std::vector<uint64_t>& codes, uint32_t instruction = 0,
                                  uint32_t depth = 0,
                                  uint32_t status = BPFPROF_PYTHON_STACK_COMPLETE,
                                  uint32_t outermost_flags = 0) {
    bpfprof_python_stack_event e{};
    e.header = {BPFPROF_EVENT_PYTHON_STACK, 0, time_ns, static_cast<__u32>(kSelf.value), 77};
    e.status = status;
    for (const uint64_t code : codes) {
      e.frames[e.depth].code = code;
      e.frames[e.depth].first_line = 1;
      e.frames[e.depth++].instruction = instruction;
    }
    if (e.depth) e.frames[e.depth - 1].flags = outermost_flags;
    if (depth) e.depth = depth;
    stacks.take_event(&e, sizeof(e), recording_.stats.runtimes[RuntimeKind::kPython]);
    std::vector<uint64_t> user = {0x10, interpreter_->eval_start + 16, 0x30};
    stacks.merge_into(kSelf, Tid{77}, MonotonicNs{time_ns}, user, recording_);
    std::vector<std::string> names;
    for (const uint64_t raw : user)
      if (auto frame = runtime_frame_of(raw))
        names.push_back(recording_.runtime_frames.function_of(*frame).qualified_name);
    return names;
  }
  FakeObjects objects() { return FakeObjects(*interpreter_); }

  Recording recording_;
  PythonProcesses processes_;
  const PythonInterpreter* interpreter_ = nullptr;
};

TEST_F(PythonStacksBudget, FramesPastTheBudgetAreUnknownAndTheProcessIsCounted) {
  FakeObjects fake = objects();
  PythonReadLimits limits;
  limits.objects_per_process = 2;
  PythonStacks stacks(processes_, limits);
  EXPECT_EQ(recording_.stats.runtimes[RuntimeKind::kPython].interpreters, 0u)
      << "a mapping is not yet an interpreter";
  const uint64_t garbage = fake.garbage(64);
  const std::vector<std::string> names =
      sample(stacks, 1000, {fake.code("inner"), garbage, fake.code("outer")});
  EXPECT_EQ(names, (std::vector<std::string>{"inner", "[unknown Python code]",
                                             "[unknown Python code: read budget used up]"}));
  EXPECT_EQ(recording_.stats.runtimes[RuntimeKind::kPython].read_budget_used_up, 1u);
  EXPECT_EQ(recording_.stats.runtimes[RuntimeKind::kPython].unnamed_frames, 2u);
  EXPECT_EQ(recording_.stats.runtimes[RuntimeKind::kPython].frames, 1u);
  EXPECT_EQ(recording_.stats.runtimes[RuntimeKind::kPython].interpreters, 1u);
  sample(stacks, 2000, {garbage});
  EXPECT_EQ(recording_.stats.runtimes[RuntimeKind::kPython].interpreters, 1u);
}

TEST_F(PythonStacksBudget, ASampleKeepsAtMostTheBpfSidesFrames) {
  FakeObjects fake = objects();
  PythonStacks stacks(processes_);
  const std::vector<uint64_t> codes(BPFPROF_MAX_PYTHON_FRAMES, fake.code("deep"));
  // The event says it holds more frames than any event can.
  const std::vector<std::string> names = sample(stacks, 1000, codes, 0, 100000);
  EXPECT_EQ(names.size(), size_t{BPFPROF_MAX_PYTHON_FRAMES});
}

TEST_F(PythonStacksBudget, AStackTheBpfSideCutEndsInAnUnknownFrame) {
  FakeObjects fake = objects();
  PythonStacks stacks(processes_);
  const uint64_t code = fake.code("cycle");
  // A frame whose previous frame is itself: read up to the limit.
  const std::vector<uint64_t> cycle(BPFPROF_MAX_PYTHON_FRAMES, code);
  std::vector<std::string> names = sample(stacks, 1000, cycle, 0, 0, BPFPROF_PYTHON_STACK_AT_LIMIT);
  ASSERT_EQ(names.size(), size_t{BPFPROF_MAX_PYTHON_FRAMES} + 1);
  EXPECT_EQ(names.front(), "cycle");
  EXPECT_EQ(names.back(), "[unknown Python frames: more than 96 deep]");
  names = sample(stacks, 2000, {code, code}, 0, 0, BPFPROF_PYTHON_STACK_UNREADABLE);
  EXPECT_EQ(names, (std::vector<std::string>{"cycle", "cycle",
                                             "[unknown Python frames: unreadable frame]"}));
  // The last frame read says it begins its activation (garbage does): the rest is still there.
  names = sample(stacks, 3000, {code, code}, 0, 0, BPFPROF_PYTHON_STACK_UNREADABLE,
                 BPFPROF_PYTHON_FRAME_ENTRY);
  EXPECT_EQ(names, (std::vector<std::string>{"cycle", "cycle",
                                             "[unknown Python frames: unreadable frame]"}));
  EXPECT_EQ(sample(stacks, 4000, {code}), std::vector<std::string>{"cycle"});
  EXPECT_EQ(recording_.stats.runtimes[RuntimeKind::kPython].mismatched, 0u);
}

// pyenv's 3.12, whose chains begin with a shim frame (its libpython at a made-up address).
class PythonStacksWithShims : public PythonStacksBudget {
 protected:
  void SetUp() override {
    MappingInfo text{.start = 0x7f0000106000, .length = 0x273000, .file_offset = 0x106000};
    text.path = "/root/.pyenv/versions/3.12.1/lib/libpython3.12.so.1.0";
    start_interpreter(text);
  }
};

TEST_F(PythonStacksWithShims, AChainWithoutItsOutermostShimHasUnknownCallers) {
  FakeObjects fake = objects();
  PythonStacks stacks(processes_);
  const uint64_t code = fake.code("ripen");
  EXPECT_EQ(sample(stacks, 1000, {code, code}, 0, 0, BPFPROF_PYTHON_STACK_COMPLETE,
                   BPFPROF_PYTHON_FRAME_SHIM),
            (std::vector<std::string>{"ripen"}));
  EXPECT_EQ(recording_.stats.runtimes[RuntimeKind::kPython].unreadable, 0u);
  // A generator's frame unlinked from its caller while still the thread's current frame.
  EXPECT_EQ(sample(stacks, 2000, {code}),
            (std::vector<std::string>{"ripen", "[unknown Python frames: read mid-switch]"}));
  EXPECT_EQ(recording_.stats.runtimes[RuntimeKind::kPython].unreadable, 1u);
  EXPECT_EQ(recording_.stats.runtimes[RuntimeKind::kPython].mismatched, 0u);
}

TEST_F(PythonStacksBudget, TheCacheOfNamedFramesIsBounded) {
  FakeObjects fake = objects();
  PythonReadLimits limits;
  limits.named_frames_per_process = 8;
  PythonStacks stacks(processes_, limits);
  const uint64_t code = fake.code("moving");
  // A new instruction at every sample.
  for (uint32_t i = 0; i < 20; ++i) {
    EXPECT_EQ(sample(stacks, 1000 + i, {code}, 2 * i), std::vector<std::string>{"moving"});
    EXPECT_LE(stacks.named_frames(kSelf), 8u);
  }
  EXPECT_EQ(recording_.stats.runtimes[RuntimeKind::kPython].code_objects_read, 1u)
      << "the code object stays read";
}

}  // namespace
}  // namespace bpfprof
