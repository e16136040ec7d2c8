#include "symbols/demangle.h"

#include <gtest/gtest.h>

#include <random>
#include <string>

namespace bpfprof {
namespace {

TEST(DemangleTest, CppWithoutParameterList) {
  EXPECT_EQ(demangle("_ZN2ns5ClassIiE6methodEv"), "ns::Class<int>::method");
  EXPECT_EQ(demangle("_Z3fooi"), "foo");
  EXPECT_EQ(demangle("_ZNSt6vectorIiSaIiEE9push_backERKi"),
            "std::vector<int, std::allocator<int> >::push_back");
  EXPECT_EQ(demangle("_ZN2ns1AC2Ev"), "ns::A::A");
  EXPECT_EQ(demangle("_ZN2ns1AD1Ev"), "ns::A::~A");
  EXPECT_EQ(demangle("_ZNK2ns1A3getEv"), "ns::A::get");
  EXPECT_EQ(demangle("_ZZ4mainENKUlvE_clEv"), "main::{lambda()#1}::operator()");
  EXPECT_EQ(demangle("_ZN2nsL6helperEv"), "ns::helper");  // internal linkage
}

TEST(DemangleTest, CppCloneSuffixesJoinTheirFunction) {
  // GCC's function clones (.cold, .isra.0, .constprop.0): without DMGL_PARAMS libiberty
  // names them like the function itself, so they merge with it in the call tree.
  EXPECT_EQ(demangle("_Z3foov.cold"), "foo");
  EXPECT_EQ(demangle("_Z3barii.isra.0"), "bar");
}

TEST(DemangleTest, CppWithSymbolVersion) {
  EXPECT_EQ(demangle("_ZNSo3putEc@@GLIBCXX_3.4"), "std::ostream::put");
  EXPECT_EQ(demangle("_ZSt9terminatev@GLIBCXX_3.4"), "std::terminate");
}

TEST(DemangleTest, RustLegacyDropsTheHash) {
  EXPECT_EQ(demangle("_ZN4core3fmt5write17h0123456789abcdefE"), "core::fmt::write");
  EXPECT_EQ(demangle("_ZN1r4main17h086b0cfd890a8ea9E"), "r::main");
  EXPECT_EQ(demangle("_ZN60_$LT$alloc..string..String$u20$as$u20$core..fmt..Display$GT$"
                     "3fmt17h1234567890abcdefE"),
            "<alloc::string::String as core::fmt::Display>::fmt");
}

TEST(DemangleTest, RustV0) {
  EXPECT_EQ(demangle("_RNvCs6GmmlP4bgsG_1r4main"), "r::main");
  EXPECT_EQ(demangle("_RNvNtCs1234_7mycrate3foo3bar"), "mycrate::foo::bar");
  const std::string generic = demangle("_RINvNtCs1234_7mycrate3foo3bazmE");
  EXPECT_EQ(generic, "mycrate::foo::baz::<u32>");
}

TEST(DemangleTest, PlainNamesAreUnchanged) {
  for (const char* name :
       {"main", "inner_spin", "Foo", "__libc_start_call_main", "_start", "foo__bar", "main.cold",
        "_Z", "_R", "_Zfoo", "_RX", "", "@", "a@", "operator new", "0x7f0012345678", "[unknown]"})
    EXPECT_EQ(demangle(name), name) << name;
}

TEST(DemangleTest, SymbolVersionIsRemoved) {
  EXPECT_EQ(demangle("clock_gettime@@GLIBC_2.17"), "clock_gettime");
  EXPECT_EQ(demangle("foo@GLIBC_2.2.5"), "foo");
  EXPECT_EQ(demangle("memcpy@GLIBC_2.14"), "memcpy");
  // Not a version: left alone.
  EXPECT_EQ(demangle("weird@name with spaces"), "weird@name with spaces");
  EXPECT_EQ(demangle("@@GLIBC_2.17"), "@@GLIBC_2.17");
  EXPECT_EQ(strip_symbol_version("pthread_create@@GLIBC_2.34"), "pthread_create");
  EXPECT_EQ(strip_symbol_version("pthread_create"), "pthread_create");
}

TEST(DemangleTest, PltSuffixStays) {
  EXPECT_EQ(demangle("labs@plt"), "labs@plt");
  EXPECT_EQ(demangle("_ZN2ns5Class6methodEv@plt"), "ns::Class::method@plt");
  EXPECT_EQ(demangle("@plt"), "@plt");
}

TEST(DemangleTest, EmbeddedNulIsNotDemangled) {
  const std::string with_nul("_Z3foo\0v", 8);
  EXPECT_EQ(demangle(with_nul), with_nul);
}

TEST(DemangleTest, SurvivesGarbage) {
  std::mt19937_64 rng(12345);
  const std::string alphabet = "_ZRNvCsIEKSt0123456789abcdefhlmpuvxyz$.@LBDTS";
  for (int i = 0; i < 20000; i++) {
    std::string s;
    const size_t len = rng() % 64;
    const bool printable = i % 2 == 0;
    s = (i % 3 == 0) ? "_Z" : (i % 3 == 1) ? "_R" : "";
    for (size_t k = 0; k < len; k++)
      s.push_back(printable ? alphabet[rng() % alphabet.size()] : static_cast<char>(rng() % 256));
    const std::string out = demangle(s);
    (void)out;  // any result is fine; no crash, no hang
  }
  // Deep nesting must hit libiberty's recursion limit, not the stack.
  std::string deep = "_Z1f";
  for (int i = 0; i < 100000; i++) deep += "PFv";
  EXPECT_NO_FATAL_FAILURE(demangle(deep));
  std::string deep_rust = "_RNv";
  for (int i = 0; i < 100000; i++) deep_rust += "Nv";
  EXPECT_NO_FATAL_FAILURE(demangle(deep_rust));
}

}  // namespace
}  // namespace bpfprof
