#include "userspace/session/output_writer.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>

namespace bpfprof {
namespace {

namespace fs = std::filesystem;

// A directory of its own, and TMPDIR (the first fallback place) pointing at another.
class OutputWriterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = make_dir("out");
    fallback_ = make_dir("fallback");
    if (const char* tmpdir = getenv("TMPDIR")) saved_tmpdir_ = tmpdir;
    setenv("TMPDIR", fallback_.c_str(), 1);
  }
  void TearDown() override {
    if (saved_tmpdir_)
      setenv("TMPDIR", saved_tmpdir_->c_str(), 1);
    else
      unsetenv("TMPDIR");
    fs::remove_all(dir_);
    fs::remove_all(fallback_);
  }

  static std::string make_dir(const std::string& what) {
    std::string pattern = "/tmp/bpfprof_output_writer_" + what + "_XXXXXX";
    if (!mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp");
    return pattern;
  }
  static std::string contents(const std::string& path) {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }
  // Writes `text`; the report says how many times it was asked.
  OutputWriter::Write text_of(const std::string& text, int* calls) {
    return [text, calls](OutputSink& sink) {
      ++*calls;
      sink.write(text);
      RunReport report;
      report.samples = static_cast<uint64_t>(*calls);
      return report;
    };
  }

  std::string dir_;
  std::string fallback_;
  std::optional<std::string> saved_tmpdir_;
};

TEST_F(OutputWriterTest, WritesTheOutputFile) {
  OutputWriter output(dir_ + "/p.folded", std::nullopt);
  WritingProfile writing(output.temp_path());
  int calls = 0;
  std::optional<OutputWriter::Written> written = output.write(text_of("a;b 1\n", &calls), writing);
  ASSERT_TRUE(written);
  EXPECT_EQ(written->path, dir_ + "/p.folded");
  EXPECT_EQ(written->report.samples, 1u);
  EXPECT_EQ(contents(written->path), "a;b 1\n");
  EXPECT_FALSE(fs::exists(fallback_ + "/p.folded"));
}

TEST_F(OutputWriterTest, OpeningFailsAtOnceForAMissingDirectory) {
  EXPECT_THROW(OutputWriter(dir_ + "/missing/p.folded", std::nullopt), std::exception);
}

TEST_F(OutputWriterTest, AFailedWriteGoesToTheFallbackUnderTheSameName) {
  OutputWriter output(dir_ + "/p.folded", std::nullopt);
  WritingProfile writing(output.temp_path());
  int calls = 0;
  // The first attempt (the output file) fails; the second (TMPDIR) works.
  auto write = [&](OutputSink& sink) {
    if (++calls == 1) throw std::runtime_error("disk full");
    sink.write("x 1\n");
    return RunReport{};
  };
  std::optional<OutputWriter::Written> written = output.write(write, writing);
  ASSERT_TRUE(written);
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(written->path, fallback_ + "/p.folded");
  EXPECT_EQ(contents(written->path), "x 1\n");
  EXPECT_FALSE(fs::exists(dir_ + "/p.folded"));
}

TEST_F(OutputWriterTest, NothingWrittenWhenEveryPlaceFails) {
  OutputWriter output(dir_ + "/p.folded", std::nullopt);
  WritingProfile writing(output.temp_path());
  const std::string home = make_dir("home");
  const char* saved_home = getenv("HOME");
  const std::string old_home = saved_home ? saved_home : "";
  setenv("HOME", home.c_str(), 1);
  int calls = 0;
  auto write = [&](OutputSink&) -> RunReport {
    ++calls;
    throw std::runtime_error("no space");
  };
  EXPECT_FALSE(output.write(write, writing));
  EXPECT_EQ(calls, 3);  // the output, TMPDIR, ~/.cache/bpfprof
  EXPECT_TRUE(fs::is_directory(home + "/.cache/bpfprof"));
  if (saved_home)
    setenv("HOME", old_home.c_str(), 1);
  else
    unsetenv("HOME");
  fs::remove_all(home);
}

TEST_F(OutputWriterTest, MovingToAnotherNameKeepsTheOutputWhenItCannotBeOpened) {
  OutputWriter output(dir_ + "/p.folded", std::nullopt);
  output.move_to(dir_ + "/missing/q.folded");
  EXPECT_EQ(output.path(), dir_ + "/p.folded");
  output.move_to(dir_ + "/q.folded");
  EXPECT_EQ(output.path(), dir_ + "/q.folded");
  WritingProfile writing(output.temp_path());
  int calls = 0;
  ASSERT_TRUE(output.write(text_of("q 1\n", &calls), writing));
  EXPECT_EQ(contents(dir_ + "/q.folded"), "q 1\n");
  EXPECT_FALSE(fs::exists(dir_ + "/p.folded"));
}

}  // namespace
}  // namespace bpfprof
