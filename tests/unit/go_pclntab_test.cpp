// Go's function tables (symbols/go/pclntab.h) against the Go toolchain's own reading of the
// same binaries: `go tool objdump` (each instruction's function, file and line) and `go tool
// addr2line`, for the go_cpu fixture built as is and stripped (-s -w); the inline frames
// against the compiler's `-gcflags=-m` report. esbuild's npm binary, built by a current Go
// release, is beyond what the installed toolchain (1.19) can read: its table is checked for
// what any Go binary's must give.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "symbols/go/pclntab.h"
#include "symbols/symbolizer.h"
#include "tests/unit/test_commands.h"
#include "tests/unit/test_helpers.h"

namespace bpfprof {
namespace {

using testing_helpers::go_fixture;
using testing_helpers::kEsbuild;

namespace fs = std::filesystem;
using go::GoFrame;
using go::GoTable;
using testing_helpers::run_command;

const fs::path kSourceDir = fs::path(TEST_SOURCE_DIR) / "tests";
const fs::path kGoFixtureSource = kSourceDir / "fixtures/go";

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::unique_ptr<GoTable> load(const std::string& path) {
  std::vector<uint8_t> bytes = read_bytes(path);
  std::string error;
  std::unique_ptr<GoTable> table = GoTable::from_elf(bytes, &error);
  EXPECT_TRUE(table) << path << ": " << error;
  return table;
}

// One instruction as `go tool objdump` shows it.
struct Instruction {
  std::string function;  // the TEXT symbol that holds it
  std::string file;      // base name
  uint32_t line = 0;
};

// Every instruction of the functions matching `pattern`, by address. objdump needs the symbol
// table: the unstripped build's, whose code is the stripped one's (-s -w drops the symbol
// table and DWARF only).
std::map<uint64_t, Instruction> objdump(const std::string& pattern) {
  std::map<uint64_t, Instruction> out;
  std::istringstream lines(
      run_command("go tool objdump -s '" + pattern + "' " + go_fixture("go_cpu")));
  static const std::regex kText(R"(^TEXT (\S+)\(SB\))");
  static const std::regex kInstruction(R"(^\s+(\S+):(\d+)\s+0x([0-9a-f]+)\s)");
  std::string line, function;
  std::smatch m;
  while (std::getline(lines, line)) {
    if (std::regex_search(line, m, kText)) {
      function = m[1];
    } else if (std::regex_search(line, m, kInstruction)) {
      out[std::stoull(m[3], nullptr, 16)] = {function, m[1],
                                             static_cast<uint32_t>(std::stoul(m[2]))};
    }
  }
  return out;
}

// `go tool addr2line`: the function (the outermost, as Go's debug/gosym names it) and the
// innermost file and line of each address.
std::vector<GoFrame> addr2line(const std::string& binary, const std::vector<uint64_t>& pcs) {
  std::ostringstream input;
  for (uint64_t pc : pcs) input << "0x" << std::hex << pc << "\n";
  // Through a pipe: the tests of both fixtures run at once (a shared file in /tmp raced).
  std::istringstream lines(
      run_command("printf '%s' '" + input.str() + "' | go tool addr2line " + binary));
  std::vector<GoFrame> out;
  std::string name, position;
  while (std::getline(lines, name) && std::getline(lines, position)) {
    const size_t colon = position.rfind(':');
    // Line -1 or 0: none (padding after a function's code).
    const long line = std::stol(position.substr(colon + 1));
    out.push_back({name, position.substr(0, colon), static_cast<uint32_t>(std::max(line, 0l))});
  }
  return out;
}

std::string base_name(const std::string& path) { return fs::path(path).filename().string(); }

bool have_go_fixtures() {
  return fs::exists(go_fixture("go_cpu")) && fs::exists(go_fixture("go_cpu_stripped")) &&
         !run_command("command -v go").empty();
}

class GoFixture : public testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (!have_go_fixtures()) GTEST_SKIP() << "no Go toolchain or Go fixtures";
  }
};

// Every instruction of package main and of sort: the function is objdump's TEXT symbol, the
// innermost frame's file and line are objdump's.
TEST_P(GoFixture, FunctionsFilesAndLinesAsObjdumpSaysThem) {
  const std::string binary = go_fixture(GetParam());
  std::unique_ptr<GoTable> table = load(binary);
  ASSERT_TRUE(table);
  EXPECT_EQ(table->format(), go::PclntabFormat::kGo118);  // the installed go1.19
  std::map<uint64_t, Instruction> instructions = objdump("^(main|sort)\\.");
  ASSERT_GT(instructions.size(), 200u);
  for (const auto& [pc, expected] : instructions) {
    std::vector<GoFrame> frames = table->frames_at(pc);
    ASSERT_FALSE(frames.empty()) << std::hex << pc;
    EXPECT_EQ(frames.front().function, expected.function) << std::hex << pc;
    EXPECT_EQ(base_name(frames.back().file), expected.file) << std::hex << pc;
    EXPECT_EQ(frames.back().line, expected.line) << std::hex << pc;
  }
}

// addr2line over pcs spread through the whole text, runtime included: full file paths.
TEST_P(GoFixture, AgreesWithAddr2line) {
  const std::string binary = go_fixture(GetParam());
  std::unique_ptr<GoTable> table = load(binary);
  ASSERT_TRUE(table);
  std::vector<uint64_t> pcs;
  const uint64_t step = (table->text_end() - table->text_begin()) / 997;
  for (uint64_t pc = table->text_begin(); pc < table->text_end(); pc += step) pcs.push_back(pc);
  std::vector<GoFrame> expected = addr2line(binary, pcs);
  ASSERT_EQ(expected.size(), pcs.size());
  size_t compared = 0;
  for (size_t i = 0; i < pcs.size(); ++i) {
    if (expected[i].function == "?") continue;  // padding between functions
    std::vector<GoFrame> frames = table->frames_at(pcs[i]);
    ASSERT_FALSE(frames.empty()) << std::hex << pcs[i];
    EXPECT_EQ(frames.front().function, expected[i].function) << std::hex << pcs[i];
    EXPECT_EQ(frames.back().file, expected[i].file) << std::hex << pcs[i];
    EXPECT_EQ(frames.back().line, expected[i].line) << std::hex << pcs[i];
    ++compared;
  }
  EXPECT_GT(compared, 900u);
}

// The lines where the compiler inlined a call to `callee`, from its -m report.
std::set<uint32_t> inlined_call_lines(const std::string& callee) {
  const fs::path cache = fs::temp_directory_path() / "bpfprof_go_unit_cache";
  std::istringstream lines(run_command("cd " + kGoFixtureSource.string() +
                                       " && GOFLAGS=-mod=mod GOCACHE=" + cache.string() +
                                       " go build -gcflags=-m -o /dev/null . 2>&1"));
  std::set<uint32_t> out;
  static const std::regex kInlined(R"(main\.go:(\d+):\d+: inlining call to (\S+))");
  std::string line;
  std::smatch m;
  while (std::getline(lines, line))
    if (std::regex_search(line, m, kInlined) && m[2] == callee) out.insert(std::stoul(m[1]));
  return out;
}

// The lines of `func name(` up to its closing brace in the fixture's source.
std::set<uint32_t> source_lines_of(const std::string& name) {
  std::ifstream in(kGoFixtureSource / "main.go");
  std::set<uint32_t> out;
  std::string line;
  bool inside = false;
  for (uint32_t number = 1; std::getline(in, line); ++number) {
    if (line.starts_with("func " + name + "(")) inside = true;
    if (inside) out.insert(number);
    if (inside && line == "}") break;
  }
  return out;
}

// mix is inlined into spinInlined: the instructions objdump puts on mix's lines are two
// frames, the call at the line the compiler reports, the inlined code at objdump's line.
TEST_P(GoFixture, InlinedCallsAreFrames) {
  const std::string binary = go_fixture(GetParam());
  std::unique_ptr<GoTable> table = load(binary);
  ASSERT_TRUE(table);
  ASSERT_TRUE(table->has_inline_trees());
  std::set<uint32_t> call_lines = inlined_call_lines("mix");
  ASSERT_FALSE(call_lines.empty());
  std::map<uint64_t, Instruction> caller = objdump("^main\\.spinInlined$");
  std::set<uint32_t> mix_lines = source_lines_of("mix");
  ASSERT_FALSE(mix_lines.empty());
  size_t inlined = 0;
  for (const auto& [pc, expected] : caller) {
    std::vector<GoFrame> frames = table->frames_at(pc);
    ASSERT_FALSE(frames.empty());
    EXPECT_EQ(frames[0].function, "main.spinInlined");
    if (!mix_lines.count(expected.line)) {
      EXPECT_EQ(frames.size(), 1u) << std::hex << pc;
      continue;
    }
    ++inlined;
    ASSERT_EQ(frames.size(), 2u) << std::hex << pc;
    EXPECT_TRUE(call_lines.count(frames[0].line)) << frames[0].line;
    EXPECT_EQ(frames[1].function, "main.mix");
    EXPECT_EQ(frames[1].line, expected.line);
    EXPECT_EQ(base_name(frames[1].file), "main.go");
  }
  EXPECT_GT(inlined, 3u);
}

// The symbolizer names the stripped binary's code from the table, inline frames included,
// never from the entry point's ELF symbol.
TEST_P(GoFixture, SymbolizerUsesTheTable) {
  const std::string binary = go_fixture(GetParam());
  std::map<uint64_t, Instruction> caller = objdump("^main\\.spinInlined$");
  std::set<uint32_t> mix_lines = source_lines_of("mix");
  Symbolizer symbolizer;
  const uint64_t base = 0x400000;  // a non-PIE Go executable's
  size_t inlined = 0;
  for (const auto& [pc, expected] : caller) {
    std::vector<SymbolizedFrame> frames = symbolizer.symbolize_relative(binary, pc - base);
    ASSERT_FALSE(frames.empty());
    EXPECT_EQ(frames[0].name, "main.spinInlined");
    ASSERT_TRUE(frames[0].symbol);
    EXPECT_EQ(frames[0].symbol->name, "main.spinInlined");
    EXPECT_EQ(frames.back().line, expected.line);
    if (frames.size() == 2 && mix_lines.count(expected.line)) {
      ++inlined;
      EXPECT_EQ(frames[1].name, "main.mix");
      EXPECT_EQ(frames[1].inline_depth, 1u);
    }
  }
  EXPECT_GT(inlined, 3u);
}

INSTANTIATE_TEST_SUITE_P(GoCpu, GoFixture, testing::Values("go_cpu", "go_cpu_stripped"));

// The position-independent build (which go1.19's objdump and addr2line cannot read): its
// table is found in .data.rel.ro.gopclntab, runtime.text and go:func.* through relocations;
// mix's code in spinInlined is two frames, as in the executable.
TEST(GoPclntab, PositionIndependentBuild) {
  if (!have_go_fixtures() || !fs::exists(go_fixture("go_cpu_pie")))
    GTEST_SKIP() << "no Go fixtures";
  std::unique_ptr<GoTable> table = load(go_fixture("go_cpu_pie"));
  ASSERT_TRUE(table);
  ASSERT_TRUE(table->has_inline_trees());
  std::optional<go::GoFunction> spin;
  for (size_t i = 0; i < table->function_count() && !spin; ++i)
    if (std::optional<go::GoFunction> f = table->function(i); f && f->name == "main.spinInlined")
      spin = f;
  ASSERT_TRUE(spin);
  std::set<uint32_t> mix_lines = source_lines_of("mix");
  std::set<uint32_t> call_lines = inlined_call_lines("mix");
  size_t inlined = 0;
  for (uint64_t pc = spin->entry; pc < spin->end; ++pc) {
    std::vector<GoFrame> frames = table->frames_at(pc);
    ASSERT_FALSE(frames.empty());
    EXPECT_EQ(frames[0].function, "main.spinInlined");
    if (frames.size() < 2) continue;
    ++inlined;
    EXPECT_EQ(frames[1].function, "main.mix");
    EXPECT_TRUE(mix_lines.count(frames[1].line)) << frames[1].line;
    EXPECT_TRUE(call_lines.count(frames[0].line)) << frames[0].line;
  }
  EXPECT_GT(inlined, 10u);
}

// The Go release that built a binary ("go1.26.5"): the newest release its strings name (its
// runtime.buildVersion; `go version -m` of the installed 1.19 cannot read newer build info).
std::string go_release_of(const std::vector<uint8_t>& bytes) {
  const std::string_view text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  std::string newest;
  int newest_minor = -1;
  for (size_t at = text.find("go1."); at != std::string_view::npos;
       at = text.find("go1.", at + 1)) {
    size_t end = at + 4;
    int minor = 0;
    while (end < text.size() && isdigit(static_cast<unsigned char>(text[end])))
      minor = std::min(minor * 10 + (text[end++] - '0'), 1000);
    if (end == at + 4 || end >= text.size() || text[end] != '.') continue;
    while (++end < text.size() && isdigit(static_cast<unsigned char>(text[end]))) {
    }
    if (minor > newest_minor) {
      newest_minor = minor;
      newest = std::string(text.substr(at, end - at));
    }
  }
  return newest;
}

TEST(GoEsbuild, CurrentReleaseTable) {
  if (!fs::exists(kEsbuild)) GTEST_SKIP() << "no esbuild (npm install in tests/integration)";
  std::vector<uint8_t> bytes = read_bytes(kEsbuild);
  const std::string release = go_release_of(bytes);
  ASSERT_FALSE(release.empty());
  EXPECT_GE(std::stoi(release.substr(4)), 22) << release;
  std::unique_ptr<GoTable> table = load(kEsbuild);
  ASSERT_TRUE(table);
  EXPECT_EQ(table->format(), go::PclntabFormat::kGo120);
  ASSERT_TRUE(table->has_inline_trees());
  std::map<std::string, go::GoFunction> by_name;
  size_t with_inline = 0;
  for (size_t i = 0; i < table->function_count(); ++i) {
    std::optional<go::GoFunction> f = table->function(i);
    ASSERT_TRUE(f) << i;
    ASSERT_LT(f->entry, f->end);
    by_name.emplace(std::string(f->name), *f);
    if (f->name.starts_with("go:")) continue;  // the linker's markers (go:textfipsstart)
    // Every pc of a function is its own; its entry, and every inlined call, has a file and a
    // line (the padding after a function's code has none).
    for (uint64_t pc = f->entry; pc < f->end;
         pc += std::max<uint64_t>(1, (f->end - f->entry) / 8)) {
      std::vector<GoFrame> frames = table->frames_at(pc);
      ASSERT_FALSE(frames.empty());
      EXPECT_EQ(frames[0].function, f->name);
      for (size_t depth = pc == f->entry ? 0 : 1; depth < frames.size(); ++depth) {
        EXPECT_FALSE(frames[depth].file.empty()) << frames[depth].function;
        EXPECT_GT(frames[depth].line, 0u) << frames[depth].function;
      }
      with_inline += frames.size() > 1;
    }
  }
  EXPECT_GT(table->function_count(), 5000u);
  for (const char* name :
       {"runtime.main", "main.main", "runtime.mallocgc", "github.com/evanw/esbuild/pkg/api.Build"})
    EXPECT_TRUE(by_name.count(name)) << name;
  if (by_name.count("main.main")) {
    std::vector<GoFrame> frames = table->frames_at(by_name["main.main"].entry);
    EXPECT_TRUE(frames.back().file.ends_with("cmd/esbuild/main.go")) << frames.back().file;
  }
  EXPECT_GT(with_inline, 1000u);
}

// Without section headers (sstrip, or a crafted file) the table is found by its magic and
// runtime.text and go:func.* through the moduledata: the same frames as with them.
TEST(GoPclntab, FoundWithoutSectionHeaders) {
  for (const char* name : {"go_cpu_stripped", "go_cpu_pie"}) {
    if (!fs::exists(go_fixture(name))) GTEST_SKIP() << "no Go fixtures";
    std::vector<uint8_t> file = read_bytes(go_fixture(name));
    std::unique_ptr<GoTable> with = load(go_fixture(name));
    ASSERT_TRUE(with && file.size() > 64);
    // e_shoff, e_shnum and e_shstrndx of an ELF64 header.
    std::fill(file.begin() + 0x28, file.begin() + 0x30, 0);
    std::fill(file.begin() + 0x3c, file.begin() + 0x40, 0);
    std::unique_ptr<GoTable> without = GoTable::from_elf(file, nullptr);
    ASSERT_TRUE(without) << name;
    EXPECT_EQ(without->function_count(), with->function_count());
    EXPECT_TRUE(without->has_inline_trees());
    const uint64_t step = (with->text_end() - with->text_begin()) / 4999;
    for (uint64_t pc = with->text_begin(); pc < with->text_end(); pc += step)
      ASSERT_EQ(without->frames_at(pc), with->frames_at(pc)) << name << std::hex << " " << pc;
  }
}

// Cut short at any length, or with a byte changed anywhere in its header and first records,
// the fixture's table gives a table or none, and lookups stay in bounds (the fuzz target
// tests/fuzz/fuzz_go_pclntab.cpp goes further).
TEST(GoPclntab, DamagedTablesAreRefusedOrBounded) {
  if (!fs::exists(go_fixture("go_cpu"))) GTEST_SKIP() << "no Go fixtures";
  std::vector<uint8_t> file = read_bytes(go_fixture("go_cpu"));
  std::unique_ptr<GoTable> whole = load(go_fixture("go_cpu"));
  ASSERT_TRUE(whole);
  for (size_t cut = 0; cut < file.size(); cut += file.size() / 61 + 1) {
    std::unique_ptr<GoTable> table =
        GoTable::from_elf(std::span<const uint8_t>(file).first(cut), nullptr);
    if (table) table->frames_at(whole->text_begin() + 0x100);
  }
  EXPECT_FALSE(GoTable::from_elf({}, nullptr));
  std::vector<uint8_t> noise(4096, 0xff);
  EXPECT_FALSE(GoTable::from_elf(noise, nullptr));
}

}  // namespace
}  // namespace bpfprof
