#include "symbols/kernel/kallsyms.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <random>
#include <string>

#include <chrono>
#include <fstream>
#include <sstream>

namespace bpfprof {
namespace {

constexpr std::string_view kSyntheticKallsyms =
    "ffffffff81000000 T _text\n"
    "ffffffff81000000 T startup_64\n"
    "ffffffff81000100 t local_fn\n"
    "ffffffff81000200 W weak_fn\n"
    "ffffffff81000300 D some_data\n"  // data: ignored, weak_fn runs on to 0x400
    "ffffffff81000380 b some_bss\n"
    "ffffffff81000400 T last_core_fn\n"
    "this line is garbage\n"
    "ffffffff81000500 T\n"  // no name
    "zzzzffff81000600 T bad_address\n"
    "ffffffff81000700 T bad_module\t[oops\n"
    "ffffffffc0001100 T mod_fn2\t[nf_tables]\n"  // modules are not sorted in the file
    "ffffffffc0001000 t mod_fn\t[nf_tables]\n"
    "ffffffffc0003000 t other_mod_fn\t[xfs]";  // no trailing newline

TEST(KallsymsTest, ParsesSyntheticText) {
  const KernelSymbols symbols = KernelSymbols::parse(kSyntheticKallsyms);
  EXPECT_FALSE(symbols.addresses_hidden());
  EXPECT_EQ(symbols.text_start(), 0xffffffff81000000u);
  ASSERT_EQ(symbols.size(), 7u);  // _text merged into startup_64's address

  const std::optional<KernelSymbol> start = symbols.lookup(0xffffffff81000050);
  ASSERT_TRUE(start);
  EXPECT_EQ(start->name, "startup_64");  // not the "_text" marker alias
  EXPECT_EQ(start->end, 0xffffffff81000100u);
  EXPECT_TRUE(start->module.empty());

  ASSERT_TRUE(symbols.lookup(0xffffffff81000100));
  EXPECT_EQ(symbols.lookup(0xffffffff81000100)->name, "local_fn");
  ASSERT_TRUE(symbols.lookup(0xffffffff81000399));
  EXPECT_EQ(symbols.lookup(0xffffffff81000399)->name, "weak_fn");
  ASSERT_TRUE(symbols.lookup(0xffffffff81000410));
  EXPECT_EQ(symbols.lookup(0xffffffff81000410)->name, "last_core_fn");

  const std::optional<KernelSymbol> module_symbol = symbols.lookup(0xffffffffc0001050);
  ASSERT_TRUE(module_symbol);
  EXPECT_EQ(module_symbol->name, "mod_fn");
  EXPECT_EQ(module_symbol->module, "nf_tables");
  EXPECT_EQ(module_symbol->end, 0xffffffffc0001100u);
  ASSERT_TRUE(symbols.lookup(0xffffffffc0003001));
  EXPECT_EQ(symbols.lookup(0xffffffffc0003001)->module, "xfs");
}

// A module's symbols on both sides of another's: one module, and each symbol bounded by the
// next module's first.
TEST(KallsymsTest, AModuleSeenAgainAfterAnother) {
  const KernelSymbols symbols = KernelSymbols::parse(
      "ffffffffc0001000 t a\t[one]\n"
      "ffffffffc0002000 t b\t[two]\n"
      "ffffffffc0003000 t c\t[one]\n");
  ASSERT_EQ(symbols.size(), 3u);
  EXPECT_EQ(symbols[0].module, "one");
  EXPECT_EQ(symbols[0].end, 0xffffffffc0002000u);
  EXPECT_EQ(symbols[1].module, "two");
  EXPECT_EQ(symbols[2].module, "one");
  EXPECT_EQ(symbols[2].name, "c");
  EXPECT_EQ(symbols[2].end, 0xffffffffc0003000u + 64 * 1024);
  EXPECT_EQ(symbols.lookup(0xffffffffc0002fff)->name, "b");
}

TEST(KallsymsTest, LookupOutsideSymbols) {
  const KernelSymbols symbols = KernelSymbols::parse(kSyntheticKallsyms);
  EXPECT_FALSE(symbols.lookup(0));
  EXPECT_FALSE(symbols.lookup(0xffffffff80ffffff));
  // The gap between the kernel image and the modules is not claimed by last_core_fn.
  EXPECT_FALSE(symbols.lookup(0xffffffffa0000000));
  EXPECT_FALSE(symbols.lookup(UINT64_MAX));
}

TEST(KallsymsTest, TextStartFallsBackToStextThenLowest) {
  EXPECT_EQ(KernelSymbols::parse("ffffffff81000100 T foo\n"
                                 "ffffffff81000000 T _stext\n")
                .text_start(),
            0xffffffff81000000u);
  EXPECT_EQ(KernelSymbols::parse("ffffffff81000300 T foo\n"
                                 "ffffffff81000200 t bar\n"
                                 "ffffffffc0000000 t modfn\t[m]\n")
                .text_start(),
            0xffffffff81000200u);
}

TEST(KallsymsTest, DetectsHiddenAddresses) {
  const KernelSymbols hidden = KernelSymbols::parse(
      "0000000000000000 T _text\n"
      "0000000000000000 t foo\n"
      "0000000000000000 D data\n"
      "0000000000000000 t modfn\t[m]\n");
  EXPECT_TRUE(hidden.addresses_hidden());
  EXPECT_TRUE(hidden.size() == 0);
  EXPECT_FALSE(hidden.lookup(0));
  EXPECT_EQ(hidden.text_start(), 0u);
}

TEST(KallsymsTest, EmptyAndGarbageInput) {
  const KernelSymbols empty = KernelSymbols::parse("");
  EXPECT_FALSE(empty.addresses_hidden());
  EXPECT_TRUE(empty.size() == 0);
  EXPECT_FALSE(empty.lookup(0x1234));
  const KernelSymbols garbage = KernelSymbols::parse("\n\n\x01\x02 x y\n ffff T x\nT T T\n");
  EXPECT_TRUE(garbage.size() == 0);
}

TEST(KallsymsTest, MissingFileGivesNullopt) {
  EXPECT_FALSE(KernelSymbols::load("/nonexistent/kallsyms").has_value());
}

TEST(KallsymsTest, RealKallsymsResolvesSchedule) {
  std::ifstream file("/proc/kallsyms");
  if (!file) GTEST_SKIP() << "/proc/kallsyms not readable";
  uint64_t schedule_address = 0;
  std::string line;
  while (std::getline(file, line)) {
    std::istringstream fields(line);
    std::string address, type, name;
    if (fields >> address >> type >> name && name == "schedule" && (type == "T" || type == "t")) {
      schedule_address = std::stoull(address, nullptr, 16);
      break;
    }
  }
  if (schedule_address == 0) GTEST_SKIP() << "kallsyms addresses hidden (not root?)";

  const auto start = std::chrono::steady_clock::now();
  const std::optional<KernelSymbols> symbols = KernelSymbols::load();
  const auto elapsed = std::chrono::steady_clock::now() - start;
  ASSERT_TRUE(symbols.has_value());
  const auto milliseconds = std::chrono::duration_cast<std::chrono::milliseconds>(elapsed).count();
  std::printf("kallsyms: %zu text symbols loaded in %lld ms\n", symbols->size(),
              static_cast<long long>(milliseconds));

  EXPECT_FALSE(symbols->addresses_hidden());
  EXPECT_GT(symbols->size(), 1000u);
  EXPECT_NE(symbols->text_start(), 0u);
  const std::optional<KernelSymbol> schedule = symbols->lookup(schedule_address);
  ASSERT_TRUE(schedule);
  EXPECT_EQ(schedule->name, "schedule");
  EXPECT_TRUE(schedule->module.empty());
  ASSERT_TRUE(symbols->lookup(schedule_address + 1));
  EXPECT_EQ(symbols->lookup(schedule_address + 1)->name, "schedule");
}

// With wanted addresses, only their nearest symbols are kept, and each of them is named as the
// whole table names it: same symbol, same end (module boundaries and aliases included), same
// module bases and text start. Over the machine's own kallsyms, at 3,000 addresses in text,
// both from one copy of it: the [bpf] symbols come and go as other processes load programs.
TEST(KallsymsTest, OnlyTheWantedAddressesSymbolsAreKeptAndNamedAsByTheWholeTable) {
  const std::string copy = testing::TempDir() + "/bpfprof-kallsyms-" + std::to_string(getpid());
  {
    std::ifstream in("/proc/kallsyms");
    std::ofstream out(copy);
    out << in.rdbuf();
  }
  struct RemovedAtEnd {
    const std::string& path;
    ~RemovedAtEnd() { std::remove(path.c_str()); }
  } removed_at_end{copy};  // also when skipped or failed
  const std::optional<KernelSymbols> all = KernelSymbols::load(copy);
  if (!all || all->addresses_hidden() || all->size() < 1000)
    GTEST_SKIP() << "kallsyms addresses hidden (not root?)";
  std::mt19937_64 random(54);
  std::vector<uint64_t> wanted;
  for (int i = 0; i < 3000; ++i) {
    const KernelSymbol s = (*all)[random() % all->size()];
    wanted.push_back(s.address + (s.end > s.address ? random() % (s.end - s.address + 16) : 0));
  }
  wanted.push_back((*all)[all->size() - 1].address);  // the last symbol: no end but the cap
  std::sort(wanted.begin(), wanted.end());
  wanted.erase(std::unique(wanted.begin(), wanted.end()), wanted.end());
  const std::optional<KernelSymbols> some = KernelSymbols::load(copy, wanted);
  ASSERT_TRUE(some);
  EXPECT_LT(some->size(), 2 * wanted.size() + 1);
  EXPECT_EQ(some->text_start(), all->text_start());
  for (uint64_t address : wanted) {
    const std::optional<KernelSymbol> expected = all->lookup(address);
    const std::optional<KernelSymbol> got = some->lookup(address);
    ASSERT_EQ(got.has_value(), expected.has_value()) << std::hex << address;
    if (!expected) continue;
    EXPECT_EQ(got->name, expected->name) << std::hex << address;
    EXPECT_EQ(got->address, expected->address) << std::hex << address;
    EXPECT_EQ(got->end, expected->end) << std::hex << address;
    EXPECT_EQ(got->module, expected->module) << std::hex << address;
    if (!got->module.empty()) {
      EXPECT_EQ(some->module_base(got->module), all->module_base(got->module));
    }
  }
}

}  // namespace
}  // namespace bpfprof
