#include "userspace/output/output_file.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <zlib.h>

#include <algorithm>
#include <cctype>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>

#include "userspace/output/json_writer.h"

namespace bpfprof {
namespace {

namespace fs = std::filesystem;

class OutputFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/bpfprof_output_test_XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string path(const std::string& name) const { return dir_ + "/" + name; }

  std::set<std::string> entries() const {
    std::set<std::string> names;
    for (const auto& entry : fs::directory_iterator(dir_))
      names.insert(entry.path().filename().string());
    return names;
  }

  std::string dir_;
};

std::string read_raw(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::string read_gzip(const std::string& path) {
  gzFile file = gzopen(path.c_str(), "rb");
  if (!file) throw std::runtime_error("gzopen failed: " + path);
  std::string out;
  char chunk[65536];
  int n;
  while ((n = gzread(file, chunk, sizeof chunk)) > 0) out.append(chunk, n);
  int errnum = 0;
  const char* message = gzerror(file, &errnum);
  bool failed = n < 0 || (errnum != Z_OK && errnum != Z_STREAM_END);
  std::string error = message ? message : "";
  gzclose(file);
  if (failed) throw std::runtime_error("gzread failed: " + error);
  return out;
}

bool is_gzip(const std::string& path) {
  std::string raw = read_raw(path);
  return raw.size() >= 18 && static_cast<unsigned char>(raw[0]) == 0x1F &&
         static_cast<unsigned char>(raw[1]) == 0x8B;
}

std::string random_bytes(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng());
  return s;
}

// Compressible, varied text in many small pieces plus a few big incompressible blocks, so
// both the buffered path and the pass-through path for big writes are exercised.
std::string write_mixed_content(OutputSink& sink) {
  std::string all;
  auto put = [&](std::string_view piece) {
    sink.write(piece);
    all.append(piece);
  };
  for (int i = 0; i < 150000; ++i) {
    put("{\"sample\":" + std::to_string(i) + ",\"stack\":" + std::to_string(i * 7919 % 1000) +
        "},\n");
    if (i % 50000 == 0) put(random_bytes(700 * 1024, i));  // larger than the internal buffer
    if (i % 1000 == 0) put("");
  }
  return all;
}

TEST(StringSinkTest, Accumulates) {
  StringSink sink;
  sink.write("ab");
  sink.write("");
  sink.write(std::string_view("c\0d", 3));
  EXPECT_EQ(sink.str(), std::string("abc\0d", 5));
  EXPECT_EQ(sink.take(), std::string("abc\0d", 5));
}

TEST_F(OutputFileTest, GzipRoundTrip) {
  GzipFileSink sink(path("out.json.gz"));
  std::string expected = write_mixed_content(sink);
  EXPECT_EQ(sink.bytes_written(), expected.size());
  sink.commit();
  EXPECT_TRUE(is_gzip(path("out.json.gz")));
  EXPECT_EQ(read_gzip(path("out.json.gz")), expected);
  EXPECT_EQ(sink.compressed_bytes(), fs::file_size(path("out.json.gz")));
  EXPECT_LT(sink.compressed_bytes(), sink.bytes_written());
  EXPECT_EQ(entries(), std::set<std::string>{"out.json.gz"});
}

TEST_F(OutputFileTest, GzipEmptyStreamIsValid) {
  GzipFileSink sink(path("empty.gz"));
  sink.commit();
  EXPECT_TRUE(is_gzip(path("empty.gz")));
  EXPECT_EQ(read_gzip(path("empty.gz")), "");
}

TEST_F(OutputFileTest, GzipLevelsAllRoundTrip) {
  std::string text;
  for (int i = 0; i < 20000; ++i) text += "frame " + std::to_string(i % 97) + " in libfoo.so\n";
  std::map<int, size_t> sizes;
  for (int level : {0, 1, 6, 9, Z_DEFAULT_COMPRESSION}) {
    std::string name = "level" + std::to_string(level) + ".gz";
    GzipFileSink sink(path(name), level);
    for (size_t at = 0; at < text.size(); at += 1000)
      sink.write(std::string_view(text).substr(at, 1000));
    sink.commit();
    EXPECT_EQ(read_gzip(path(name)), text) << "level " << level;
    sizes[level] = fs::file_size(path(name));
  }
  EXPECT_GT(sizes[0], text.size());  // stored, not compressed
  EXPECT_LT(sizes[9], sizes[0] / 10);
}

TEST_F(OutputFileTest, GzipRejectsBadLevelWithoutLeavingFiles) {
  EXPECT_THROW(GzipFileSink sink(path("x.gz"), 10), std::invalid_argument);
  EXPECT_THROW(GzipFileSink sink(path("x.gz"), -2), std::invalid_argument);
  EXPECT_TRUE(entries().empty());
}

TEST_F(OutputFileTest, PlainFileRoundTrip) {
  FileSink sink(path("out.json"));
  std::string expected = write_mixed_content(sink);
  EXPECT_EQ(sink.bytes_written(), expected.size());
  sink.commit();
  EXPECT_EQ(read_raw(path("out.json")), expected);
  EXPECT_EQ(entries(), std::set<std::string>{"out.json"});
}

TEST_F(OutputFileTest, TargetAppearsOnlyOnCommit) {
  for (bool gzip : {true, false}) {
    std::string name = gzip ? "profile.json.gz" : "profile.json";
    auto sink = open_output(path(name));
    sink->write(random_bytes(2 * 1024 * 1024, 1));  // enough to reach the disk
    EXPECT_FALSE(fs::exists(path(name)));
    auto names = entries();
    ASSERT_EQ(names.size(), 1u);
    std::string temp = *names.begin();
    std::string prefix = name + ".tmp.";
    ASSERT_EQ(temp.size(), prefix.size() + 6) << temp;
    EXPECT_EQ(temp.substr(0, prefix.size()), prefix);
    EXPECT_TRUE(std::all_of(temp.begin() + prefix.size(), temp.end(), [](char c) {
      return std::isalnum(c);
    })) << temp;
    EXPECT_GT(fs::file_size(path(temp)), 0u);
    sink->commit();
    EXPECT_TRUE(fs::exists(path(name)));
    EXPECT_EQ(entries(), std::set<std::string>{name});
    fs::remove(path(name));
  }
}

TEST_F(OutputFileTest, DestroyedWithoutCommitLeavesNothing) {
  for (bool gzip : {true, false}) {
    for (size_t amount : {size_t{0}, size_t{10}, size_t{3} << 20}) {
      {
        auto sink = open_output(path(gzip ? "p.json.gz" : "p.json"));
        if (amount) sink->write(random_bytes(amount, amount));
        EXPECT_EQ(entries().size(), 1u);
      }
      EXPECT_TRUE(entries().empty()) << "gzip=" << gzip << " amount=" << amount;
    }
  }
}

TEST_F(OutputFileTest, CommitReplacesExistingFileAndAbortKeepsIt) {
  std::ofstream(path("p.json")) << "old";
  {
    FileSink sink(path("p.json"));
    sink.write("new, abandoned");
  }
  EXPECT_EQ(read_raw(path("p.json")), "old");
  FileSink sink(path("p.json"));
  sink.write("new");
  EXPECT_EQ(read_raw(path("p.json")), "old");
  sink.commit();
  EXPECT_EQ(read_raw(path("p.json")), "new");
  EXPECT_EQ(entries(), std::set<std::string>{"p.json"});
}

TEST_F(OutputFileTest, OpenOutputChoosesGzipOnlyForDotGz) {
  struct Case {
    std::string name;
    bool gzip;
  };
  for (const auto& c : {Case{"a.json.gz", true}, Case{"b.gz", true}, Case{"c.json", false},
                        Case{"d.gzip", false}, Case{"e.gz.json", false}, Case{"f", false}}) {
    auto sink = open_output(path(c.name));
    EXPECT_EQ(dynamic_cast<GzipFileSink*>(sink.get()) != nullptr, c.gzip) << c.name;
    EXPECT_EQ(sink->path(), path(c.name));
    sink->write("{\"x\":1}");
    sink->commit();
    EXPECT_EQ(is_gzip(path(c.name)), c.gzip) << c.name;
    EXPECT_EQ(c.gzip ? read_gzip(path(c.name)) : read_raw(path(c.name)), "{\"x\":1}") << c.name;
  }
}

void expect_one_line_error_naming(const std::string& target, const std::string& reason) {
  for (bool gzip : {true, false}) {
    std::string name = target + (gzip ? ".json.gz" : ".json");
    try {
      auto sink = open_output(name);
      ADD_FAILURE() << "opening " << name << " should have failed";
    } catch (const std::runtime_error& e) {
      std::string message = e.what();
      EXPECT_NE(message.find(name), std::string::npos) << message;
      if (!reason.empty()) {
        EXPECT_NE(message.find(reason), std::string::npos) << message;
      }
      EXPECT_EQ(message.find('\n'), std::string::npos) << message;
    }
  }
}

TEST_F(OutputFileTest, NonexistentDirectoryThrowsOneLineMessage) {
  expect_one_line_error_naming(path("no/such/dir/profile"), "No such file or directory");
  EXPECT_TRUE(entries().empty());
}

TEST_F(OutputFileTest, UnwritableDirectoryThrowsOneLineMessage) {
  // Tests run as root, so chmod cannot make a directory unwritable; /proc is.
  expect_one_line_error_naming("/proc/bpfprof_unit_test_profile", "");
  expect_one_line_error_naming("/proc/self/bpfprof_unit_test_profile", "");
}

TEST_F(OutputFileTest, TargetThatIsADirectoryFailsAtOnce) {
  fs::create_directory(path("taken"));
  try {
    FileSink sink(path("taken"));
    FAIL() << "a directory cannot be the output";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(path("taken")), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("Is a directory"), std::string::npos) << e.what();
  }
  EXPECT_EQ(entries(), std::set<std::string>{"taken"});
}

// -o /dev/null must not replace the device with a file (a rename onto it would).
TEST_F(OutputFileTest, DeviceTargetIsWrittenInPlace) {
  for (bool gzip : {true, false}) {
    auto sink = gzip ? std::unique_ptr<CommittableSink>(new GzipFileSink("/dev/null"))
                     : std::unique_ptr<CommittableSink>(new FileSink("/dev/null"));
    EXPECT_TRUE(sink->temp_path().empty());
    sink->write("{\"x\":1}");
    sink->commit();
    struct stat st;
    ASSERT_EQ(stat("/dev/null", &st), 0);
    EXPECT_TRUE(S_ISCHR(st.st_mode)) << "/dev/null is no longer a device";
  }
}

TEST_F(OutputFileTest, FifoTargetIsWrittenInPlace) {
  ASSERT_EQ(mkfifo(path("pipe").c_str(), 0600), 0);
  std::string received;
  std::thread reader([&] { received = read_raw(path("pipe")); });
  {
    FileSink sink(path("pipe"));
    sink.write("through the pipe");
    sink.commit();
  }
  reader.join();
  EXPECT_EQ(received, "through the pipe");
  EXPECT_EQ(entries(), std::set<std::string>{"pipe"});
}

TEST_F(OutputFileTest, SymbolicLinkKeepsPointingToTheReplacedFile) {
  fs::create_directory(path("real"));
  std::ofstream(path("real/p.json")) << "old";
  fs::create_symlink(path("real/p.json"), path("link.json"));
  FileSink sink(path("link.json"));
  sink.write("new");
  sink.commit();
  EXPECT_TRUE(fs::is_symlink(path("link.json")));
  EXPECT_EQ(read_raw(path("real/p.json")), "new");
  EXPECT_EQ(read_raw(path("link.json")), "new");
}

// Makes write(2) fail with EFBIG beyond `limit` bytes, for the lifetime of this object.
class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t limit) {
    getrlimit(RLIMIT_FSIZE, &saved_);
    previous_handler_ = std::signal(SIGXFSZ, SIG_IGN);
    rlimit lowered = saved_;
    lowered.rlim_cur = limit;
    setrlimit(RLIMIT_FSIZE, &lowered);
  }
  ~FileSizeLimit() {
    setrlimit(RLIMIT_FSIZE, &saved_);
    std::signal(SIGXFSZ, previous_handler_);
  }

 private:
  rlimit saved_{};
  void (*previous_handler_)(int) = nullptr;
};

TEST_F(OutputFileTest, WriteErrorsAreReportedWithPathAndReason) {
  for (bool gzip : {true, false}) {
    std::string name = path(gzip ? "big.json.gz" : "big.json");
    {
      FileSizeLimit limit(64 * 1024);
      auto sink = open_output(name);
      std::string message;
      try {
        for (int i = 0; i < 16; ++i) sink->write(random_bytes(256 * 1024, i));
        sink->commit();
      } catch (const std::runtime_error& e) {
        message = e.what();
      }
      EXPECT_NE(message.find("cannot write " + name + ": File too large"), std::string::npos)
          << message;
      EXPECT_THROW(sink->write("more"), std::runtime_error);
      EXPECT_THROW(sink->commit(), std::runtime_error);
      EXPECT_FALSE(fs::exists(name));
    }
    EXPECT_TRUE(entries().empty()) << "temp file left behind, gzip=" << gzip;
  }
}

TEST_F(OutputFileTest, WriteErrorSurfacingOnlyAtCommit) {
  // Data small enough to sit in the buffer until commit() flushes it.
  FileSizeLimit limit(1000);
  for (bool gzip : {true, false}) {
    std::string name = path(gzip ? "late.json.gz" : "late.json");
    auto sink = open_output(name);
    sink->write(random_bytes(100 * 1024, 3));
    EXPECT_THROW(sink->commit(), std::runtime_error);
    EXPECT_FALSE(fs::exists(name));
  }
}

TEST_F(OutputFileTest, MisuseAfterCommitIsALogicError) {
  for (bool gzip : {true, false}) {
    auto sink = open_output(path(gzip ? "m.gz" : "m"));
    sink->write("x");
    sink->commit();
    EXPECT_THROW(sink->write("y"), std::logic_error);
    EXPECT_THROW(sink->commit(), std::logic_error);
  }
  EXPECT_EQ(read_raw(path("m")), "x");
  EXPECT_EQ(read_gzip(path("m.gz")), "x");
}

TEST_F(OutputFileTest, FileModeHonoursUmask) {
  for (mode_t mask : {022, 077, 002}) {
    mode_t saved = umask(mask);
    auto sink = open_output(path("mode.json.gz"));
    sink->commit();
    umask(saved);
    struct stat st {};
    ASSERT_EQ(stat(path("mode.json.gz").c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0666 & ~mask) << std::oct << mask;
  }
}

TEST_F(OutputFileTest, JsonWriterThroughGzipSink) {
  auto write_document = [](OutputSink& sink) {
    JsonWriter w(sink);
    w.begin_object();
    w.field("name", "thread \xFF\xFE name");
    w.key("samples");
    w.begin_array();
    for (int i = 0; i < 200000; ++i) w.number(static_cast<int64_t>(i) * 1000003);
    w.end_array();
    w.end_object();
    w.flush();
  };
  StringSink reference;
  write_document(reference);
  auto sink = open_output(path("profile.json.gz"));
  write_document(*sink);
  sink->commit();
  EXPECT_EQ(read_gzip(path("profile.json.gz")), reference.str());
  EXPECT_EQ(sink->bytes_written(), reference.str().size());
}

}  // namespace
}  // namespace bpfprof
