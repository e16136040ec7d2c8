// A library opened on first use: its functions found, and a missing library or function
// answered with nullptr and a one-line reason, from any thread.
#include "symbols/util/lazy_library.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace bpfprof {
namespace {

TEST(LazyLibrary, FindsAFunctionOfALibraryOpenedOnFirstUse) {
  LazyLibrary libm("libm.so.6", nullptr);
  auto* cosine = libm.function<double(double)>("cos");
  ASSERT_NE(cosine, nullptr);
  EXPECT_DOUBLE_EQ(cosine(0.0), 1.0);
  EXPECT_EQ(libm.error(), "");
}

TEST(LazyLibrary, AMissingFunctionIsNullAndSaysWhich) {
  LazyLibrary libm("libm.so.6", nullptr);
  std::vector<std::thread> lookups;
  for (int i = 0; i < 4; ++i)
    lookups.emplace_back([&] { EXPECT_EQ(libm.function<void()>("no_such_function"), nullptr); });
  for (std::thread& t : lookups) t.join();
  EXPECT_EQ(libm.error(), "libm.so.6 has no no_such_function");
}

TEST(LazyLibrary, AMissingLibraryIsNullAndSaysWhy) {
  LazyLibrary missing("libbpfprof-none.so.9", nullptr);
  EXPECT_EQ(missing.function<void()>("anything"), nullptr);
  EXPECT_NE(missing.error().find("cannot load libbpfprof-none.so.9"), std::string::npos)
      << missing.error();
}

}  // namespace
}  // namespace bpfprof
