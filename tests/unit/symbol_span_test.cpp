// function_symbols_span against a plain libelf scan of the same .symtab, on this test's own
// binary (built with its symbols): the span of the functions of a prefix as the scan finds
// it, a prefix nothing has, and files that are not ELF or are cut short.
#include <fcntl.h>
#include <gelf.h>
#include <gtest/gtest.h>
#include <libelf.h>
#include <unistd.h>

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "symbols/elf/symbol_span.h"
#include "symbols/util/unique_handle.h"
#include "tests/unit/libelf_symbols.h"

namespace bpfprof {
namespace {

// The span of the defined functions of .symtab named `prefix...`, as libelf reads them.
std::optional<SymbolSpan> scan(int fd, std::string_view prefix) {
  std::optional<SymbolSpan> span;
  testing_helpers::libelf_symbols(fd, SHT_SYMTAB, [&](std::string_view name, const GElf_Sym& s) {
    if (!name.starts_with(prefix) || GELF_ST_TYPE(s.st_info) != STT_FUNC ||
        s.st_shndx == SHN_UNDEF || !s.st_value)
      return;
    if (!span) span = SymbolSpan{s.st_value, s.st_value + s.st_size};
    span->start = std::min(span->start, s.st_value);
    span->end = std::max(span->end, s.st_value + s.st_size);
  });
  return span;
}

UniqueFd own_binary() { return UniqueFd(open("/proc/self/exe", O_RDONLY | O_CLOEXEC)); }

TEST(FunctionSymbolsSpan, AgreesWithAPlainScan) {
  const UniqueFd fd = own_binary();
  ASSERT_TRUE(fd);
  for (std::string_view prefix : {"_ZN7testing", "_ZN7bpfprof", "_ZN7testing8internal", "main"}) {
    const std::optional<SymbolSpan> expected = scan(fd.get(), prefix);
    ASSERT_TRUE(expected) << prefix << ": this binary has such functions";
    const std::optional<SymbolSpan> span = function_symbols_span(fd.get(), prefix);
    ASSERT_TRUE(span) << prefix;
    EXPECT_EQ(span->start, expected->start) << prefix;
    EXPECT_EQ(span->end, expected->end) << prefix;
    EXPECT_LT(span->start, span->end) << prefix;
  }
  EXPECT_FALSE(function_symbols_span(fd.get(), "no_function_is_named_so_"));
  EXPECT_FALSE(function_symbols_span(fd.get(), ""));
}

// A file that is not ELF, and this binary cut short (its section headers past the end).
TEST(FunctionSymbolsSpan, NothingFromAFileThatIsNotAWholeElfFile) {
  char path[] = "/tmp/bpfprof-span-XXXXXX";
  const UniqueFd out(mkstemp(path));
  ASSERT_TRUE(out);
  unlink(path);
  ASSERT_EQ(write(out.get(), "not an ELF file at all", 22), 22);
  EXPECT_FALSE(function_symbols_span(out.get(), "_ZN7testing"));
  const UniqueFd self = own_binary();
  char head[4096];
  ASSERT_EQ(pread(self.get(), head, sizeof(head), 0), static_cast<ssize_t>(sizeof(head)));
  ASSERT_EQ(ftruncate(out.get(), 0), 0);
  ASSERT_EQ(pwrite(out.get(), head, sizeof(head), 0), static_cast<ssize_t>(sizeof(head)));
  EXPECT_FALSE(function_symbols_span(out.get(), "_ZN7testing"));
}

}  // namespace
}  // namespace bpfprof
