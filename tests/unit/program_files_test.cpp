// What `record -- CMD` loads tables for before the command runs (userspace/session/
// program_files.h): the program, its loader and libraries, as the loader itself lists them.
#include "userspace/session/program_files.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <string>
#include <vector>

namespace bpfprof {
namespace {

bool has(const std::vector<std::string>& files, const std::string& suffix) {
  return std::any_of(files.begin(), files.end(),
                     [&](const std::string& f) { return f.ends_with(suffix); });
}

TEST(ProgramFiles, ParsesTheLoadersList) {
  const std::string output =
      "\tlinux-vdso.so.1 (0x00007ffd2d5f0000)\n"
      "\tlibz.so.1 => /lib/x86_64-linux-gnu/libz.so.1 (0x00007f0b1c5a0000)\n"
      "\tlibmissing.so.2 => not found\n"
      "\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f0b1c3b0000)\n"
      "\t/lib64/ld-linux-x86-64.so.2 (0x00007f0b1c5e0000)\n"
      "\tlibz.so.1 => /lib/x86_64-linux-gnu/libz.so.1 (0x00007f0b1c5a0000)\n";
  EXPECT_EQ(parse_loader_list(output), (std::vector<std::string>{"/lib/x86_64-linux-gnu/libz.so.1",
                                                                 "/lib/x86_64-linux-gnu/libc.so.6",
                                                                 "/lib64/ld-linux-x86-64.so.2"}));
  EXPECT_TRUE(parse_loader_list("").empty());
  EXPECT_TRUE(parse_loader_list("\tstatically linked\n").empty());
}

TEST(ProgramFiles, ADynamicProgramWithItsLoaderAndLibraries) {
  const std::vector<std::string> files = files_mapped_at_start("/usr/bin/python3.11");
  ASSERT_GE(files.size(), 3u);
  EXPECT_EQ(files[0], "/usr/bin/python3.11");
  EXPECT_TRUE(has(files, "/libc.so.6"));
  EXPECT_TRUE(has(files, "/libz.so.1.2.13"));  // real paths: the link's target
  EXPECT_TRUE(has(files, "/ld-linux-x86-64.so.2"));
}

TEST(ProgramFiles, AScriptGivesItsInterpretersFiles) {
  char path[] = "/tmp/bpfprof_program_files_XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  std::ofstream(path) << "#!/usr/bin/env python3.11\nprint(1)\n";
  // env finds the interpreter in PATH (here it may hold shims that are scripts themselves).
  const std::string saved_path = getenv("PATH") ? getenv("PATH") : "";
  setenv("PATH", "/usr/bin:/bin", 1);
  const std::vector<std::string> files = files_mapped_at_start(path);
  setenv("PATH", saved_path.c_str(), 1);
  unlink(path);
  ASSERT_FALSE(files.empty());
  EXPECT_EQ(files[0], "/usr/bin/python3.11");
  EXPECT_TRUE(has(files, "/libc.so.6"));
}

TEST(ProgramFiles, NothingForWhatCannotBeRead) {
  EXPECT_TRUE(files_mapped_at_start("/nonexistent/program").empty());
  // Not ELF, not a script: the file itself (the exec will fail and say so).
  const std::vector<std::string> files = files_mapped_at_start("/etc/hostname");
  EXPECT_LE(files.size(), 1u);
}

}  // namespace
}  // namespace bpfprof
