// The BEAM reader (runtimes/beam): the emulator's release and code-index addresses found in
// Debian's beam.smp, a pretend emulator's code index named from its bytes (and garbage
// refused), names as Erlang and Elixir print them, and a live emulator's every JIT function
// named as its own perf map (+JPperf map) names it.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>
#include <tuple>
#include <vector>

#include "runtimes/beam/binary.h"
#include "runtimes/beam/code_index.h"
#include "runtimes/beam/jit_list.h"
#include "runtimes/beam/names.h"

namespace bpfprof {
namespace {

constexpr const char* kDebianBeam = "/usr/lib/erlang/erts-13.1.5/bin/beam.smp";

TEST(BeamBinary, ReleasesAreReadFromTheBanner) {
  ASSERT_TRUE(parse_release("13.1.5] [source]"));
  EXPECT_EQ(parse_release("13.1.5] [source]")->patch, 5u);
  EXPECT_EQ(parse_release("15.2]")->minor, 2u);
  EXPECT_FALSE(parse_release("x13"));
  EXPECT_FALSE(parse_release("13]"));
  EXPECT_EQ(beam_layout(ErtsVersion{13, 1, 5}), &kErts13_1);
  EXPECT_EQ(beam_layout(ErtsVersion{14, 0, 0}), nullptr);
}

// The kit's search of a binary's text (runtimes/kit/release.h): a banner cut by the 1 MiB
// pieces' boundary is seen whole in the next piece, and the search stops once answered.
TEST(BeamBinary, TheFileTextScanSeesATextAcrossItsPieces) {
  char path[] = "/tmp/bpfprof-scan-XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  unlink(path);
  const std::string banner = "[erts-13.1.5] [source]";
  std::string bytes((size_t{1} << 20) + 4096, 'x');
  bytes.replace((size_t{1} << 20) - 10, banner.size(), banner);
  ASSERT_EQ(write(fd, bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
  std::vector<size_t> found;
  int pieces = 0;
  scan_file_text(fd, bytes.size(), [&](std::string_view piece) {
    ++pieces;
    const size_t at = piece.find(banner);
    if (at != std::string_view::npos) found.push_back(at);
    return at != std::string_view::npos;
  });
  close(fd);
  EXPECT_EQ(pieces, 2);
  EXPECT_EQ(found, std::vector<size_t>{kFileTextOverlap - 10});
}

TEST(BeamBinary, DebiansEmulatorGivesItsCodeIndexAndRangeTables) {
  if (access(kDebianBeam, R_OK) != 0) GTEST_SKIP() << "no " << kDebianBeam;
  const auto inspected = inspect_beam_binary(kDebianBeam);
  ASSERT_TRUE(std::holds_alternative<BeamBinary>(inspected))
      << std::get<BeamRejection>(inspected).reason;
  const BeamBinary& beam = std::get<BeamBinary>(inspected);
  // nm -D: the_active_code_index and erts_atom_table; `r` from find_range's lea.
  EXPECT_EQ(beam.active_code_index, 0x3fca44u);
  EXPECT_EQ(beam.atom_table, 0x4330c0u);
  EXPECT_EQ(beam.ranges, 0x3fc9e0u);
  EXPECT_EQ(beam.version.patch, 5u);
}

TEST(BeamBinary, DebiansEmulatorGivesWhatTheWalkNeeds) {
  if (access(kDebianBeam, R_OK) != 0) GTEST_SKIP() << "no " << kDebianBeam;
  const auto inspected = inspect_beam_binary(kDebianBeam);
  ASSERT_TRUE(std::holds_alternative<BeamBinary>(inspected))
      << std::get<BeamRejection>(inspected).reason;
  const BeamBinary& beam = std::get<BeamBinary>(inspected);
  // objdump: sched_thread_func's `call process_main` at 0x78dbd; nm -D for the rest.
  EXPECT_EQ(beam.root_return, 0x78dc2u);
  EXPECT_EQ(beam.scheduler_arrays[0], 0x3fb8d0u);
  EXPECT_EQ(beam.scheduler_arrays[1], 0x3fb8c8u);
  EXPECT_EQ(beam.scheduler_counts[2], 0x3fb8f0u);
  EXPECT_EQ(beam.normal_exit, 0x3fc4b0u);
  EXPECT_EQ(beam.jit_descriptor, 0x3e68c0u);
  EXPECT_EQ(beam.call_nif.start, 0x93a40u);
  EXPECT_EQ(beam.call_nif.end, 0x93a40u + 0xf2);
  EXPECT_EQ(beam.call_dirty_bif.start, 0x1720a0u);
}

TEST(BeamBinary, TheOneCallOfAFunctionGivesItsReturnAddress) {
  // call +0x10 at 0x1000 (to 0x1015), a nop, then another call elsewhere.
  std::vector<uint8_t> code{0xe8, 0x10, 0x00, 0x00, 0x00, 0x90, 0xe8, 0x00, 0x01, 0x00, 0x00};
  EXPECT_EQ(only_call_return(code, 0x1000, 0x1015), 0x1005u);
  EXPECT_FALSE(only_call_return(code, 0x1000, 0x2000));
  code.insert(code.end(), {0xe8, 0x05, 0x00, 0x00, 0x00});  // a second call to 0x1015
  EXPECT_FALSE(only_call_return(code, 0x1000, 0x1015));
  EXPECT_FALSE(only_call_return(std::span<const uint8_t>(code.data(), 4), 0x1000, 0x1015));
}

// A code registration as the JIT writes it for GDB: header, base, ranges with their lines.
std::vector<uint8_t> jit_record(
    std::string_view code, const std::vector<std::tuple<uint32_t, uint32_t, std::string>>& ranges,
    uint32_t lines_each) {
  std::vector<uint8_t> r(32 + code.size() + 1);
  auto put = [&](size_t at, const void* v, size_t n) {
    if (r.size() < at + n) r.resize(at + n);
    memcpy(r.data() + at, v, n);
  };
  const uint32_t header = 1, count = static_cast<uint32_t>(ranges.size());
  const uint64_t base = 0x7f0000001000;
  const uint16_t length = static_cast<uint16_t>(code.size() + 1);
  put(0, &header, 4);
  put(8, &base, 8);
  put(16, &count, 4);
  put(24, &length, 2);
  put(26, code.data(), code.size());
  size_t at = 32 + length;
  for (const auto& [start, end, name] : ranges) {
    const uint16_t name_length = static_cast<uint16_t>(name.size() + 1);
    put(at, &start, 4);
    put(at + 4, &end, 4);
    put(at + 8, &lines_each, 4);
    put(at + 12, &name_length, 2);
    put(at + 14, name.c_str(), name_length);
    at += 16 + name_length;
    for (uint32_t i = 0; i < lines_each; ++i) {
      const uint16_t file_length = 6;
      put(at + 8, &file_length, 2);
      put(at + 10, "a.erl", 6);
      at += 12 + file_length;
    }
  }
  return r;
}

TEST(BeamJitList, TheSchedulerLoopIsFoundInTheFragmentsRecord) {
  const auto record = jit_record(
      "global", {{0, 0x60, "global::apply_fun_shared"}, {0x14e0, 0x16d0, "global::process_main"}},
      2);
  const auto found = jit_record_range(record, "global", "global::process_main");
  ASSERT_TRUE(found);
  EXPECT_EQ(found->start, 0x7f00000024e0u);
  EXPECT_EQ(found->end, 0x7f00000026d0u);
  // The kernel's module `global` has ranges named global:fun/arity, never the fragment's.
  EXPECT_FALSE(jit_record_range(jit_record("global", {{0, 0x10, "global:f/0"}}, 0), "global",
                                "global::process_main"));
  EXPECT_FALSE(jit_record_range(record, "lists", "global::process_main"));
  // Cut before the range's name ends (its two lines, 18 bytes each, follow it), the record
  // gives nothing rather than a range read past its end.
  for (size_t cut = 0; cut < record.size() - 2 * 18; ++cut)
    EXPECT_FALSE(jit_record_range(std::span(record.data(), cut), "global", "global::process_main"))
        << cut;
}

TEST(BeamBinary, AnotherProgramIsRejectedWithAReason) {
  const auto inspected = inspect_beam_binary("/bin/true");
  ASSERT_TRUE(std::holds_alternative<BeamRejection>(inspected));
  EXPECT_NE(std::get<BeamRejection>(inspected).reason.find("no code index"), std::string::npos);
}

TEST(BeamBinary, FindRangesLoadsAreDecodedFromItsInstructions) {
  // mov 0x2f429a(%rip),%r8d; lea 0x2f4232(%rip),%r9; mov %r8,%rax; shl $0x5,%rax
  const uint8_t code[] = {0x44, 0x8b, 0x05, 0x9a, 0x42, 0x2f, 0x00, 0x4c, 0x8d, 0x0d, 0x32,
                          0x42, 0x2f, 0x00, 0x4c, 0x89, 0xc0, 0x48, 0xc1, 0xe0, 0x05};
  const std::optional<BeamRangeCode> decoded = decode_find_range(code, 0x1087a0);
  ASSERT_TRUE(decoded);
  EXPECT_EQ(decoded->active_code_index, 0x1087a7u + 0x2f429a);
  EXPECT_EQ(decoded->ranges, 0x3fc9e0u);
  EXPECT_EQ(decoded->stride_shift, 5u);
  EXPECT_FALSE(decode_find_range(std::span(code, 14), 0x1087a0)) << "no shift";
  const uint8_t call[] = {0x90, 0xe8, 0x10, 0x00, 0x00, 0x00};
  EXPECT_EQ(first_call_target(call, 0x1000), 0x1000u + 6 + 0x10);
  EXPECT_FALSE(first_call_target(std::span(call, 3), 0x1000));
}

TEST(BeamNames, AsErlangAndElixirPrintThem) {
  EXPECT_EQ(beam_function_name({"lists", "reverse", 2}), "lists:reverse/2");
  EXPECT_EQ(beam_function_name({"erl_init", "-start/2-fun-0-", 0}), "erl_init:'-start/2-fun-0-'/0");
  EXPECT_EQ(beam_function_name({"prim_eval", "receive", 2}), "prim_eval:receive/2")
      << "as the emulator's perf map has it";
  EXPECT_EQ(beam_function_name({"Mod", "it's", 1}), "'Mod':'it\\'s'/1");
  EXPECT_EQ(beam_function_name({"Elixir.Enum", "-map/2-lists^map/1-0-", 2}),
            "Enum.\"-map/2-lists^map/1-0-\"/2");
  EXPECT_EQ(beam_function_name({"Elixir.Kernel", "+", 2}), "Kernel.+/2");
  EXPECT_EQ(beam_function_name({"Elixir.File", "exists?", 1}), "File.exists?/1");
  EXPECT_EQ(beam_function_name({"Elixir.Foo", "Bar", 0}), "Foo.\"Bar\"/0");
  EXPECT_EQ(beam_function_name({"Elixir.Fixture.Work", "inner", 1}), "Fixture.Work.inner/1");
  EXPECT_EQ(beam_function_name({"Elixir.Fixture.Work", "-middle/1-fun-0-", 1}),
            "anonymous fn/1 in Fixture.Work.middle/1");
}

// A pretend emulator: the code index, a range table of two modules, their headers and
// functions, MFAs and atoms, placed in memory as ERTS 13.1 lays them out.
class PretendBeam : public testing::Test {
 protected:
  static constexpr uint64_t kActive = 0x1000, kRanges = 0x2000, kAtoms = 0x3000;
  static constexpr uint64_t kSegments = 0x4000, kSegment = 0x5000, kAtomEntries = 0x6000;
  static constexpr uint64_t kTable = 0x7000, kModuleA = 0x10000, kModuleB = 0x20000;

  void SetUp() override {
    put_u32(kActive, 1);
    place_ranges(1, kTable, {{kModuleA, kModuleA + 0x1000}, {kModuleB, kModuleB + 0x800}});
    std::string atoms(kSegments - kAtoms + 8, '\0');
    put(atoms, 120, kSegments);
    memory_.place(kAtoms, atoms.substr(0, 128));
    std::string segments(8, '\0');
    put(segments, 0, kSegment);
    memory_.place(kSegments, segments);
    const char* names[] = {"work", "inner", "outer", "Elixir.Fixture.Work", "run"};
    std::string segment(8 * 5, '\0');
    for (uint64_t i = 0; i < 5; ++i) {
      put(segment, i * 8, kAtomEntries + i * 0x100);
      std::string atom(40 + strlen(names[i]), '\0');
      const int16_t length = static_cast<int16_t>(strlen(names[i]));
      memcpy(atom.data() + 24, &length, 2);
      put(atom, 32, kAtomEntries + i * 0x100 + 40);
      memcpy(atom.data() + 40, names[i], strlen(names[i]));
      memory_.place(kAtomEntries + i * 0x100, atom);
    }
    memory_.place(kSegment, segment);
    place_module(kModuleA, {{0, 1, 1}, {0, 2, 0}}, 0x1000);
    place_module(kModuleB, {{3, 4, 2}}, 0x800);
  }
  static uint64_t atom(uint64_t index) { return index << 6 | kBeamAtomTag; }
  static void put(std::string& bytes, size_t at, uint64_t value) {
    memcpy(bytes.data() + at, &value, 8);
  }
  void put_u32(uint64_t address, uint32_t value) {
    memory_.place(address, std::string(reinterpret_cast<const char*>(&value), 4));
  }
  void place_ranges(uint32_t index, uint64_t table,
                    const std::vector<std::pair<uint64_t, uint64_t>>& modules) {
    std::string ranges(3 * 32, '\0');
    put(ranges, index * 32, table);
    put(ranges, index * 32 + 8, modules.size());
    memory_.place(kRanges, ranges);
    std::string entries(modules.size() * 16, '\0');
    for (size_t i = 0; i < modules.size(); ++i) {
      put(entries, i * 16, modules[i].first);
      put(entries, i * 16 + 8, modules[i].second);
    }
    memory_.place(table, entries);
  }
  // A module at `header`: functions of (module atom, function atom, arity) spread over `size`.
  void place_module(uint64_t header, const std::vector<std::array<uint64_t, 3>>& functions,
                    uint64_t size) {
    std::string bytes(size, '\0');
    put(bytes, 0, functions.size());
    const uint64_t first = 0x100, step = (size - first) / functions.size();
    for (size_t i = 0; i <= functions.size(); ++i)
      put(bytes, 0x60 + i * 8, header + first + i * step);
    for (size_t i = 0; i < functions.size(); ++i) {
      put(bytes, first + i * step + 16, atom(functions[i][0]));
      put(bytes, first + i * step + 24, atom(functions[i][1]));
      put(bytes, first + i * step + 32, functions[i][2]);
    }
    memory_.place(header, bytes);
  }
  std::optional<std::string> name_at(BeamCodeIndex& index, uint64_t pc) {
    RemoteReader reader(memory_, 1 << 20, 0);
    const std::optional<BeamMfa> mfa = index.function_at(reader, pc);
    return mfa ? std::optional(beam_function_name(*mfa)) : std::nullopt;
  }

  BufferMemory memory_;
  BeamCodeIndex index_{kErts13_1, {kActive, kRanges, kAtoms}};
};

TEST_F(PretendBeam, EachPcIsNamedByTheFunctionHoldingIt) {
  EXPECT_EQ(name_at(index_, kModuleA + 0x150), "work:inner/1");
  EXPECT_EQ(name_at(index_, kModuleA + 0x900), "work:outer/0");
  EXPECT_EQ(name_at(index_, kModuleB + 0x200), "Fixture.Work.run/2");
  EXPECT_FALSE(name_at(index_, kModuleA + 0x50)) << "the module's header, before its functions";
  EXPECT_FALSE(name_at(index_, kModuleB + 0x900)) << "past the module";
  EXPECT_EQ(index_.tables_read(), 1u)
      << "a pc outside every module reads the index's generation only";
}

TEST_F(PretendBeam, AModuleLoadedLaterIsFoundInTheNewCodeIndex) {
  EXPECT_EQ(name_at(index_, kModuleA + 0x150), "work:inner/1");
  constexpr uint64_t kModuleC = 0x30000;
  place_module(kModuleC, {{0, 2, 3}}, 0x400);
  place_ranges(
      2, 0x8000,
      {{kModuleA, kModuleA + 0x1000}, {kModuleB, kModuleB + 0x800}, {kModuleC, kModuleC + 0x400}});
  put_u32(kActive, 2);
  EXPECT_EQ(name_at(index_, kModuleC + 0x200), "work:outer/3");
  EXPECT_EQ(index_.tables_read(), 2u);
}

TEST_F(PretendBeam, TablesThatCannotBeTheEmulatorsAreNotRead) {
  put_u32(kActive, 7);  // no such code index
  EXPECT_FALSE(name_at(index_, kModuleA + 0x150));
  put_u32(kActive, 1);
  place_ranges(1, kTable, {{kModuleB, kModuleB + 0x800}, {kModuleA, kModuleA + 0x1000}});
  EXPECT_FALSE(name_at(index_, kModuleA + 0x150)) << "out of order";
  place_ranges(1, kTable, {{kModuleA, kModuleA + 0x1000}});
  std::string header(8, '\0');
  put(header, 0, kMaxBeamModuleFunctions + 1);
  memory_.place(kModuleA, header + std::string(0x1000 - 8, '\0'));
  EXPECT_FALSE(name_at(index_, kModuleA + 0x150)) << "more functions than a module has";
}

// A live emulator with its perf map (+JPperf map): every Erlang function the map names, the
// code index names the same, at the same address.
TEST(BeamLive, EveryFunctionOfThePerfMapIsNamedTheSame) {
  if (access(kDebianBeam, R_OK) != 0 || access("/usr/bin/erl", X_OK) != 0)
    GTEST_SKIP() << "no Erlang (scripts/install-deps.sh)";
  const auto inspected = inspect_beam_binary(kDebianBeam);
  ASSERT_TRUE(std::holds_alternative<BeamBinary>(inspected));
  const BeamBinary& beam = std::get<BeamBinary>(inspected);
  // The emulator says "ready" once booted: every module it loads at boot is in its code index
  // and its perf map by then (a slow machine boots it in seconds).
  int out[2];
  ASSERT_EQ(pipe(out), 0);
  const pid_t child = fork();
  if (child == 0) {
    dup2(out[1], 1);
    close(out[0]);
    execl("/usr/bin/erl", "erl", "+JPperf", "map", "-noshell", "-eval",
          "io:format(\"ready~n\"), timer:sleep(60000)", static_cast<char*>(nullptr));
    _exit(127);
  }
  ASSERT_GT(child, 0);
  // Killed however the test ends.
  struct Reaped {
    pid_t pid;
    ~Reaped() {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
  } reaped{child};
  close(out[1]);
  std::string said;
  char buffer[64];
  for (ssize_t got;
       said.find("ready") == std::string::npos && (got = read(out[0], buffer, sizeof(buffer))) > 0;)
    said.append(buffer, static_cast<size_t>(got));
  close(out[0]);
  // The emulator's pid: erl execs erlexec, which execs beam.smp in the same process.
  const std::string map_path = "/tmp/perf-" + std::to_string(child) + ".map";
  std::string maps;
  {
    std::ifstream f("/proc/" + std::to_string(child) + "/maps");
    std::stringstream text;
    text << f.rdbuf();
    maps = text.str();
  }
  ASSERT_NE(said.find("ready"), std::string::npos) << "erl did not boot: " << said;
  uint64_t bias = 0;
  std::istringstream lines(maps);
  for (std::string line; std::getline(lines, line);) {
    if (line.find("beam.smp") == std::string::npos) continue;
    uint64_t start = 0, offset = 0;
    char perms[8];
    if (sscanf(line.c_str(), "%lx-%*x %7s %lx", &start, perms, &offset) == 3 && offset == 0) {
      bias = start;
      break;
    }
  }
  ASSERT_NE(bias, 0u) << maps;
  ProcessMemory memory{Pid{child}};
  RemoteReader reader(memory, 64 << 20, 0);
  BeamCodeIndex index(*beam.layout,
                      {beam.active_code_index + bias, beam.ranges + bias, beam.atom_table + bias});
  std::ifstream map(map_path);
  size_t functions = 0, named = 0;
  std::vector<std::string> differ;
  BeamCodeRange process_main;
  for (std::string line; std::getline(map, line);) {
    uint64_t start = 0, size = 0;
    char symbol[1024];
    if (sscanf(line.c_str(), "%lx %lx %1023[^\n]", &start, &size, symbol) != 3) continue;
    std::string name(symbol);
    if (name == "$global::process_main") process_main = BeamCodeRange{start, start + size};
    if (!name.starts_with("$") || name.find("::") != std::string::npos ||
        name.ends_with("-CodeInfoPrologue") || name.starts_with("$erts_beamasm:"))
      continue;
    ++functions;
    const std::optional<BeamMfa> mfa = index.function_at(reader, start + size / 2);
    if (!mfa) continue;
    ++named;
    if ("$" + beam_function_name(*mfa) != name && differ.size() < 5)
      differ.push_back(name + " named " + beam_function_name(*mfa));
  }
  unlink(map_path.c_str());
  EXPECT_GT(functions, 1000u) << "the booted emulator's functions in its perf map";
  EXPECT_EQ(named, functions);
  EXPECT_TRUE(differ.empty()) << differ.front();
  // The scheduler loop, as the JIT told GDB, is where the perf map has it.
  const std::optional<BeamCodeRange> told =
      find_jit_range(reader, beam.jit_descriptor + bias, "global", "global::process_main");
  ASSERT_TRUE(told);
  EXPECT_NE(process_main.start, 0u);
  EXPECT_EQ(told->start, process_main.start);
  EXPECT_EQ(told->end, process_main.end);
}

}  // namespace
}  // namespace bpfprof
