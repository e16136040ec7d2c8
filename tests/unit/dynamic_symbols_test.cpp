// read_dynamic_symbols against a plain scan of the same .dynsym with libelf, on the C library
// this test runs on: every wanted name found as the scan finds it, and nothing else.
#include <fcntl.h>
#include <gelf.h>
#include <gtest/gtest.h>
#include <libelf.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "symbols/elf/elf_file.h"
#include "symbols/util/unique_handle.h"
#include "tests/unit/libelf_symbols.h"
#include "tests/unit/test_commands.h"

namespace bpfprof {
namespace {

// Every dynamic symbol by name (the first of a name), as libelf reads them one by one.
std::map<std::string, DynamicSymbol> scan(int fd) {
  std::map<std::string, DynamicSymbol> all;
  testing_helpers::libelf_symbols(fd, SHT_DYNSYM, [&](const char* name, const GElf_Sym& s) {
    all.try_emplace(name, DynamicSymbol{s.st_value, s.st_size, s.st_shndx != SHN_UNDEF});
  });
  return all;
}

TEST(DynamicSymbols, TheWantedNamesAreFoundAsAFullScanFindsThem) {
  const std::string libc = testing_helpers::own_libc();
  ASSERT_FALSE(libc.empty());
  const UniqueFd fd(open(libc.c_str(), O_RDONLY | O_CLOEXEC));
  ASSERT_TRUE(fd);
  const std::map<std::string, DynamicSymbol> all = scan(fd.get());
  ASSERT_GT(all.size(), 1000u);
  std::vector<std::string> names;
  std::mt19937 random(7);
  std::vector<std::string> every;
  for (const auto& [name, symbol] : all) every.push_back(name);
  for (int i = 0; i < 200; ++i) names.push_back(every[random() % every.size()]);
  for (const auto& [name, symbol] : all)
    if (!symbol.defined) names.push_back(name);  // those libc takes from ld.so
  // Not in the table: a real name's prefix, with a suffix, and longer than any.
  names.insert(names.end(), {"mallo", "malloc_", "no_such_symbol", std::string(300, 'x')});
  const auto found = read_dynamic_symbols(fd.get(), names);
  size_t expected = 0;
  for (const std::string& name : names) {
    const auto it = all.find(name);
    if (it == all.end()) {
      EXPECT_FALSE(found.contains(name)) << name;
      continue;
    }
    ++expected;
    ASSERT_TRUE(found.contains(name)) << name;
    EXPECT_EQ(found.at(name).address, it->second.address) << name;
    EXPECT_EQ(found.at(name).size, it->second.size) << name;
    EXPECT_EQ(found.at(name).defined, it->second.defined) << name;
  }
  EXPECT_GT(expected, 150u);
  EXPECT_LE(found.size(), names.size());
}

}  // namespace
}  // namespace bpfprof
