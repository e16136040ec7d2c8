// Names for code in stripped binaries: PLT slots (name@plt), the entry point (_start), the
// limits of size-0 and undefined symbols, and one fn_0xSTART per .eh_frame FDE.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <regex>
#include <sstream>
#include <string>

#include "symbols/dwarf/debug_hint.h"
#include "symbols/dwarf/dwarf_module.h"
#include "symbols/elf/elf_file.h"
#include "symbols/symbolizer.h"
#include "tests/unit/test_commands.h"

namespace bpfprof {
namespace {

namespace fs = std::filesystem;
using testing_helpers::run_command;
using testing_helpers::write_file;

// Static functions calling libc through the PLT (-fno-builtin: labs is not inlined); labs's
// address is taken in code, so in a non-PIE executable its undefined .dynsym entry carries
// the PLT slot's address as its value. The
// assembly gives size-0 symbols: zero_one alone at the end of its own section, zero_two
// just before a sized symbol.
constexpr char kStrippedProgram[] = R"(
#include <stdlib.h>
#include <string.h>
volatile char buffer[64] = "hello";
static __attribute__((noinline)) long mix(long x) { return labs(x - 1000) + (long)strlen((const char*)buffer); }
static __attribute__((noinline)) long spin(long n) {
  long sum = 0;
  for (long i = 0; i < n; ++i) sum += mix(i) * 3 + (sum >> 7);
  return sum;
}
__attribute__((noinline)) long (*labs_pointer(void))(long) { return labs; }
__asm__(".section .text_one,\"ax\",@progbits\n.globl zero_one\n.type zero_one,@function\nzero_one:\n nop\n nop\n ret\n"
        ".section .text_two,\"ax\",@progbits\n nop\n nop\n.globl zero_two\n.type zero_two,@function\nzero_two:\n nop\n ret\n"
        ".globl sized_fn\n.type sized_fn,@function\nsized_fn:\n nop\n ret\n.size sized_fn, .-sized_fn\n.text\n");
int main(int argc, char** argv) { (void)argv; return (int)(spin(argc * 1000) + labs_pointer()(argc)); }
)";

// Symbol (or PLT slot) name -> address, as binutils sees it.
using Addresses = std::map<std::string, uint64_t>;

Addresses nm_symbols(const std::string& path) {
  Addresses addresses;
  std::istringstream lines(run_command("nm " + path + " 2>/dev/null"));
  std::string line;
  static const std::regex kLine(R"(^([0-9a-f]+) [A-Za-z] (\S+)$)");
  std::smatch match;
  while (std::getline(lines, line)) {
    if (std::regex_match(line, match, kLine))
      addresses.emplace(match[2], std::stoull(match[1], nullptr, 16));
  }
  return addresses;
}

// objdump's "0000000000401030 <labs@plt>:" lines.
Addresses objdump_plt_slots(const std::string& path) {
  Addresses slots;
  std::istringstream lines(
      run_command("objdump -d -j .plt -j .plt.sec -j .plt.got " + path + " 2>/dev/null"));
  std::string line;
  static const std::regex kLabel(R"(^([0-9a-f]+) <([^>+-]+@plt)>:$)");
  std::smatch match;
  while (std::getline(lines, line)) {
    if (std::regex_match(line, match, kLabel))
      slots.emplace(match[2], std::stoull(match[1], nullptr, 16));
  }
  return slots;
}

uint64_t entry_point(const std::string& path) {
  const std::string header = run_command("readelf -h " + path);
  std::smatch match;
  static const std::regex kEntry(R"(Entry point address:\s+0x([0-9a-f]+))");
  return std::regex_search(header, match, kEntry) ? std::stoull(match[1], nullptr, 16) : 0;
}

// Every PLT slot objdump names is named the same, with the slot's own extent.
void expect_plt_names_as_objdump(const std::string& path) {
  auto file = ElfFile::open(path, nullptr);
  ASSERT_NE(file, nullptr);
  const Addresses slots = objdump_plt_slots(path);
  ASSERT_FALSE(slots.empty()) << path;
  for (const auto& [name, address] : slots) {
    const Symbol* symbol = file->lookup(address + 4);
    ASSERT_NE(symbol, nullptr) << name;
    EXPECT_EQ(symbol->name, name);
    EXPECT_EQ(symbol->address, address);
    EXPECT_LE(symbol->size, 16u);
  }
}

class StrippedNamesTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    char directory_template[] = "/tmp/bpfprof_stripped_test_XXXXXX";
    if (mkdtemp(directory_template) == nullptr) return;
    directory_ = directory_template;
    write_file(directory_ / "program.c", kStrippedProgram);
    const std::string compile = "cc -O2 -fno-builtin -fomit-frame-pointer -fno-pie -no-pie " +
                                (directory_ / "program.c").string();
    compiled_ = std::system((compile + " -o " + path("full")).c_str()) == 0 &&
                std::system(("strip -o " + path("stripped") + " " + path("full")).c_str()) == 0;
    // .plt.sec (lazy stubs in .plt, the called slots with endbr64 in .plt.sec), if ld knows it.
    std::system(
        (compile + " -fcf-protection -Wl,-z,ibtplt -s -o " + path("ibt") + " 2>/dev/null").c_str());
  }
  static void TearDownTestSuite() {
    std::error_code ignored;
    if (!directory_.empty()) fs::remove_all(directory_, ignored);
  }
  void SetUp() override {
    if (!compiled_) GTEST_SKIP() << "cannot compile and strip test programs";
  }
  static std::string path(const std::string& name) { return (directory_ / name).string(); }

  // The outermost frame for `vaddr` of the stripped program, as the profile would show it.
  static SymbolizedFrame symbolize_stripped(Symbolizer& symbolizer, uint64_t vaddr) {
    auto file = ElfFile::open(path("stripped"), nullptr);
    const std::optional<uint64_t> offset = file ? file->vaddr_to_file_offset(vaddr) : std::nullopt;
    EXPECT_TRUE(offset.has_value());
    return symbolizer.symbolize_in_file(path("stripped"), offset.value_or(0)).front();
  }

  static inline fs::path directory_;
  static inline bool compiled_ = false;
};

TEST_F(StrippedNamesTest, PltSlotsAreNamedLikeObjdump) {
  expect_plt_names_as_objdump(path("stripped"));
  EXPECT_TRUE(objdump_plt_slots(path("stripped")).contains("labs@plt"));
  if (fs::exists(path("ibt")) && !objdump_plt_slots(path("ibt")).empty())
    expect_plt_names_as_objdump(path("ibt"));
}

TEST(StrippedSystemBinariesTest, PltSlotsAreNamedLikeObjdump) {
  for (const char* binary : {"/usr/bin/python3.11", "/usr/lib/gcc/x86_64-linux-gnu/12/cc1"}) {
    if (!fs::exists(binary)) continue;
    SCOPED_TRACE(binary);
    expect_plt_names_as_objdump(binary);
  }
}

TEST_F(StrippedNamesTest, EntryPointIsStartWithItsFdeExtent) {
  const uint64_t entry = entry_point(path("stripped"));
  ASSERT_NE(entry, 0u);
  Symbolizer symbolizer;
  const SymbolizedFrame start = symbolize_stripped(symbolizer, entry + 1);
  EXPECT_EQ(start.name, "_start");
  EXPECT_FALSE(start.named_by_address);
  ASSERT_TRUE(start.symbol.has_value());
  EXPECT_EQ(start.symbol->relative_address, entry - 0x400000);
  EXPECT_GT(start.symbol->size, 0u);
  EXPECT_LT(start.symbol->size, 64u);  // its FDE, not everything up to the end of .text
  // main follows in another FDE: not _start's.
  const SymbolizedFrame main_frame =
      symbolize_stripped(symbolizer, nm_symbols(path("full")).at("main") + 1);
  EXPECT_NE(main_frame.name, "_start");
  // crtstuff's functions follow _start with no CFI of their own: past _start's FDE, not _start.
  const Addresses full = nm_symbols(path("full"));
  int checked = 0;
  for (const char* crt :
       {"deregister_tm_clones", "register_tm_clones", "__do_global_dtors_aux", "frame_dummy"}) {
    auto it = full.find(crt);
    if (it == full.end() || it->second <= entry) continue;
    ++checked;
    EXPECT_NE(symbolize_stripped(symbolizer, it->second).name, "_start") << crt;
  }
  EXPECT_GT(checked, 0) << "no crtstuff function after the entry point";
}

TEST_F(StrippedNamesTest, UndefinedSymbolsNeverNameCode) {
  const std::string dynsym = run_command("readelf -W --dyn-syms " + path("stripped"));
  std::smatch match;
  ASSERT_TRUE(std::regex_search(
      dynsym, match, std::regex(R"(: ([0-9a-f]+)\s+0 FUNC\s+GLOBAL DEFAULT\s+UND labs)")))
      << "expected labs undefined with the PLT slot as its value:\n"
      << dynsym;
  const uint64_t labs_value = std::stoull(match[1], nullptr, 16);
  ASSERT_NE(labs_value, 0u);

  auto dwarf = DwarfModule::open(path("stripped"), {});
  ASSERT_NE(dwarf, nullptr);
  EXPECT_EQ(dwarf->symbol_at(labs_value), nullptr);
  EXPECT_EQ(dwarf->symbol_at(labs_value + 0x100), nullptr);
  Symbolizer symbolizer;
  EXPECT_EQ(symbolize_stripped(symbolizer, labs_value).name, "labs@plt");
  for (const char* function : {"main", "spin", "mix"}) {
    EXPECT_NE(symbolize_stripped(symbolizer, nm_symbols(path("full")).at(function)).name, "labs")
        << function;
  }
}

TEST_F(StrippedNamesTest, SizeZeroSymbolsStopAtTheNextSymbolAndTheirSection) {
  const Addresses nm = nm_symbols(path("full"));
  auto file = ElfFile::open(path("full"), nullptr);
  auto dwarf = DwarfModule::open(path("full"), {});
  ASSERT_NE(file, nullptr);
  ASSERT_NE(dwarf, nullptr);
  for (auto lookup :
       {std::function<const Symbol*(uint64_t)>([&](uint64_t a) { return file->lookup(a); }),
        std::function<const Symbol*(uint64_t)>([&](uint64_t a) { return dwarf->symbol_at(a); })}) {
    const Symbol* zero_one = lookup(nm.at("zero_one"));
    ASSERT_NE(zero_one, nullptr);
    EXPECT_EQ(zero_one->size, 3u);  // nop, nop, ret: the end of .text_one
    const Symbol* in_next_section = lookup(nm.at("zero_two") - 2);  // .text_two's first nop
    EXPECT_TRUE(in_next_section == nullptr || in_next_section->name != "zero_one");
    const Symbol* zero_two = lookup(nm.at("zero_two"));
    ASSERT_NE(zero_two, nullptr);
    EXPECT_EQ(zero_two->size, nm.at("sized_fn") - nm.at("zero_two"));
    ASSERT_NE(lookup(nm.at("sized_fn") + 1), nullptr);
    EXPECT_EQ(lookup(nm.at("sized_fn") + 1)->name, "sized_fn");
  }
}

TEST_F(StrippedNamesTest, UnnamedCodeIsGroupedByFde) {
  const Addresses nm = nm_symbols(path("full"));
  Symbolizer symbolizer;
  const SymbolizedFrame spin_start = symbolize_stripped(symbolizer, nm.at("spin"));
  const SymbolizedFrame spin_inside = symbolize_stripped(symbolizer, nm.at("spin") + 9);
  const SymbolizedFrame mix = symbolize_stripped(symbolizer, nm.at("mix") + 3);
  char expected[32];
  snprintf(expected, sizeof expected, "fn_0x%llx", static_cast<unsigned long long>(nm.at("spin")));
  EXPECT_EQ(spin_start.name, expected);
  EXPECT_TRUE(spin_start.named_by_address);
  EXPECT_EQ(spin_inside.name, spin_start.name);
  ASSERT_TRUE(spin_start.symbol && spin_inside.symbol && mix.symbol);
  EXPECT_EQ(spin_inside.symbol->relative_address, spin_start.symbol->relative_address);
  EXPECT_EQ(spin_inside.symbol->size, spin_start.symbol->size);
  EXPECT_GT(spin_start.symbol->size, 9u);
  EXPECT_NE(mix.name, spin_start.name);
  EXPECT_TRUE(mix.name.starts_with("fn_0x")) << mix.name;
  EXPECT_NE(mix.symbol->relative_address, spin_start.symbol->relative_address);
}

TEST(DebugHintTest, NamesTheDebianDbgsymPackage) {
  EXPECT_EQ(debug_info_hint({}), "");
  if (run_command("command -v dpkg-query").empty() ||
      !fs::exists("/usr/lib/x86_64-linux-gnu/libc.so.6")) {
    GTEST_SKIP() << "not a Debian x86-64 system";
  }
  // dpkg knows /lib/...; merged /usr reaches the same file as /usr/lib/...
  EXPECT_EQ(debian_package_of("/usr/lib/x86_64-linux-gnu/libc.so.6"), "libc6");
  EXPECT_EQ(debian_package_of("/nonexistent/libnothing.so"), "");
  const std::string hint = debug_info_hint({"/usr/lib/x86_64-linux-gnu/libc.so.6"});
  EXPECT_NE(hint.find("libc6-dbgsym"), std::string::npos) << hint;
  EXPECT_NE(hint.find("DEBUGINFOD_URLS"), std::string::npos) << hint;
  // Several libraries, one of them no package's (dpkg-query, asked once, exits 1): the
  // packages of the others, once each.
  const std::string several =
      debug_info_hint({"/lib/x86_64-linux-gnu/libc.so.6", "/nonexistent/libnothing.so",
                       "/usr/lib/x86_64-linux-gnu/libz.so.1", "/lib/x86_64-linux-gnu/libz.so.1"});
  EXPECT_NE(several.find("install libc6-dbgsym zlib1g-dbgsym ("), std::string::npos) << several;
}

}  // namespace
}  // namespace bpfprof

namespace bpfprof {
namespace {

// A debug file that holds only .symtab (objcopy --only-keep-debug of a binary built without
// -g), found by build-id under a --symbol-dir, names the stripped binary's static functions.
TEST(SymbolDir, ASymtabOnlyDebugFileUnderASymbolDirNamesAStrippedBinary) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(testing::TempDir()) / "bpfprof-symbol-dir";
  fs::remove_all(dir);
  fs::create_directories(dir);
  testing_helpers::write_file(
      dir / "p.c",
      "static __attribute__((noinline)) int quiet_helper(int x) { return x * 7 + 1; }\n"
      "int main(int argc, char** argv) { (void)argv; return quiet_helper(argc); }\n");
  const std::string d = dir.string();
  ASSERT_EQ(std::system(("cc -O2 -Wl,--build-id -o " + d + "/p " + d + "/p.c && cp " + d + "/p " +
                         d + "/p.full && " + "objcopy --only-keep-debug " + d + "/p " + d +
                         "/p.debug && strip " + d + "/p")
                            .c_str()),
            0);
  std::string build_id =
      testing_helpers::run_command("readelf -n " + d + "/p | sed -n 's/.*Build ID: //p'");
  while (!build_id.empty() && build_id.back() == '\n') build_id.pop_back();
  ASSERT_GT(build_id.size(), 2u);
  fs::create_directories(dir / "syms/.build-id" / build_id.substr(0, 2));
  // Moved: libdwfl would find p.debug next to p by its name.
  fs::rename(dir / "p.debug",
             dir / "syms/.build-id" / build_id.substr(0, 2) / (build_id.substr(2) + ".debug"));
  const std::string nm =
      testing_helpers::run_command("nm " + d + "/p.full | sed -n 's/ t quiet_helper$//p'");
  const uint64_t vaddr = std::stoull(nm, nullptr, 16);
  std::unique_ptr<ElfFile> stripped = ElfFile::open(d + "/p", nullptr);
  ASSERT_NE(stripped, nullptr);
  const uint64_t offset = stripped->vaddr_to_file_offset(vaddr + 1).value();

  Symbolizer without(SymbolizerOptions{});
  EXPECT_NE(without.symbolize_in_file(d + "/p", offset).front().name, "quiet_helper");
  Symbolizer with(SymbolizerOptions{{(dir / "syms").string()}});
  EXPECT_EQ(with.symbolize_in_file(d + "/p", offset).front().name, "quiet_helper");
}

}  // namespace
}  // namespace bpfprof
