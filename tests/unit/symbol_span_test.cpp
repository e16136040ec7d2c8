// function_symbol_spans against a plain libelf scan of the same .symtab, on this test's own
// binary (built with its symbols): the spans of the functions of a prefix by class as the scan
// finds them, a prefix nothing has, and files that are not ELF or are cut short.
#include <fcntl.h>
#include <gelf.h>
#include <gtest/gtest.h>
#include <libelf.h>
#include <unistd.h>

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "symbols/elf/symbol_span.h"
#include "symbols/util/unique_handle.h"
#include "tests/unit/libelf_symbols.h"

namespace bpfprof {
namespace {

// A classification of names for the test: those that end in "Ev" (no parameters), those that
// name internal things (none), the others.
int classify(std::string_view name) {
  if (name.ends_with("Ev")) return 0;
  return name.find("internal") == std::string_view::npos ? 1 : -1;
}

// The spans by class of the defined functions of .symtab named `prefix...`, as libelf reads them.
std::vector<std::optional<SymbolSpan>> scan(int fd, std::string_view prefix) {
  std::vector<std::optional<SymbolSpan>> spans(2);
  testing_helpers::libelf_symbols(fd, SHT_SYMTAB, [&](std::string_view name, const GElf_Sym& s) {
    const int klass = classify(name);
    if (!name.starts_with(prefix) || klass < 0 || GELF_ST_TYPE(s.st_info) != STT_FUNC ||
        s.st_shndx == SHN_UNDEF || !s.st_value)
      return;
    std::optional<SymbolSpan>& span = spans[klass];
    if (!span) span = SymbolSpan{s.st_value, s.st_value + s.st_size};
    span->start = std::min(span->start, s.st_value);
    span->end = std::max(span->end, s.st_value + s.st_size);
  });
  return spans;
}

UniqueFd own_binary() { return UniqueFd(open("/proc/self/exe", O_RDONLY | O_CLOEXEC)); }

TEST(FunctionSymbolSpans, AgreeWithAPlainScan) {
  const UniqueFd fd = own_binary();
  ASSERT_TRUE(fd);
  for (std::string_view prefix : {"_ZN7testing", "_ZN7bpfprof", "_ZN7testing8internal", "main"}) {
    const auto expected = scan(fd.get(), prefix);
    const auto spans = function_symbol_spans(fd.get(), prefix, 2, classify);
    ASSERT_EQ(spans.size(), 2u) << prefix;
    ASSERT_TRUE(expected[0] || expected[1]) << prefix << ": this binary has such functions";
    for (size_t k = 0; k < 2; ++k) {
      ASSERT_EQ(spans[k].has_value(), expected[k].has_value()) << prefix << " class " << k;
      if (!spans[k]) continue;
      EXPECT_EQ(spans[k]->start, expected[k]->start) << prefix << " class " << k;
      EXPECT_EQ(spans[k]->end, expected[k]->end) << prefix << " class " << k;
      EXPECT_LT(spans[k]->start, spans[k]->end) << prefix << " class " << k;
    }
  }
  const auto none = function_symbol_spans(fd.get(), "no_function_is_named_so_", 2, classify);
  ASSERT_EQ(none.size(), 2u);
  EXPECT_FALSE(none[0] || none[1]);
  EXPECT_TRUE(function_symbol_spans(fd.get(), "", 2, classify).empty());
}

// A file that is not ELF, and this binary cut short (its section headers past the end).
TEST(FunctionSymbolSpans, NoneFromAFileThatIsNotAWholeElfFile) {
  char path[] = "/tmp/bpfprof-span-XXXXXX";
  const UniqueFd out(mkstemp(path));
  ASSERT_TRUE(out);
  unlink(path);
  ASSERT_EQ(write(out.get(), "not an ELF file at all", 22), 22);
  EXPECT_TRUE(function_symbol_spans(out.get(), "_ZN7testing", 2, classify).empty());
  const UniqueFd self = own_binary();
  char head[4096];
  ASSERT_EQ(pread(self.get(), head, sizeof(head), 0), static_cast<ssize_t>(sizeof(head)));
  ASSERT_EQ(ftruncate(out.get(), 0), 0);
  ASSERT_EQ(pwrite(out.get(), head, sizeof(head), 0), static_cast<ssize_t>(sizeof(head)));
  EXPECT_TRUE(function_symbol_spans(out.get(), "_ZN7testing", 2, classify).empty());
}

}  // namespace
}  // namespace bpfprof
