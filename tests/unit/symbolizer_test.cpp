#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "symbols/symbolizer.h"

namespace bpfprof {
namespace {

std::string write_kallsyms() {
  std::string path = testing::TempDir() + "/bpfprof-kallsyms-test";
  std::ofstream out(path);
  out << "ffffffff81000000 T _text\n"
         "ffffffff81000100 T schedule\n"
         "ffffffff81000200 T do_work\n"
         "ffffffffc0100000 t nf_hook_slow\t[nf_tables]\n"
         "ffffffffc0100080 t nft_do_chain\t[nf_tables]\n"
         "ffffffffc0200000 t bpf_prog_1234abcd_on_sample\t[bpf]\n";
  return path;
}

TEST(Symbolizer, KernelFramesAreNamedRelativeToTheKernelText) {
  Symbolizer symbolizer(SymbolizerOptions{{}, write_kallsyms()});
  std::vector<SymbolizedFrame> frames = symbolizer.symbolize_kernel(0xffffffff81000110ull);
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_EQ(frames[0].name, "schedule");
  EXPECT_EQ(frames[0].relative_address, 0x110u);
  EXPECT_TRUE(frames[0].kernel_module.empty());
  ASSERT_TRUE(frames[0].symbol);
  EXPECT_EQ(frames[0].symbol->relative_address, 0x100u);
  EXPECT_EQ(frames[0].symbol->size, 0x100u);
}

TEST(Symbolizer, AKernelModuleIsItsOwnLibrary) {
  Symbolizer symbolizer(SymbolizerOptions{{}, write_kallsyms()});
  std::vector<SymbolizedFrame> frames = symbolizer.symbolize_kernel(0xffffffffc0100090ull);
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_EQ(frames[0].name, "nft_do_chain");
  EXPECT_EQ(frames[0].kernel_module, "nf_tables");
  EXPECT_EQ(frames[0].relative_address, 0x90u);  // from the module's lowest symbol
  std::vector<SymbolizedFrame> bpf = symbolizer.symbolize_kernel(0xffffffffc0200010ull);
  EXPECT_EQ(bpf[0].name, "bpf_prog_1234abcd_on_sample");  // BPF programs are named too
}

TEST(Symbolizer, AnUnreadableFileGivesOneUnnamedFrameAtItsOffset) {
  Symbolizer symbolizer;
  std::vector<SymbolizedFrame> frames = symbolizer.symbolize_in_file("/nonexistent/lib.so", 0x1234);
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_TRUE(frames[0].name.empty());
  EXPECT_EQ(frames[0].relative_address, 0x1234u);
}

}  // namespace
}  // namespace bpfprof
