// Reads at an offset of an open file (symbols/util/read_file.h): all that is asked for where
// the file has it, what there is at its end, nothing from what cannot be read at an offset.
#include "symbols/util/read_file.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "symbols/util/unique_handle.h"

namespace bpfprof {
namespace {

class PreadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = ::testing::TempDir() + "pread_test_" + std::to_string(getpid());
    std::ofstream(path_, std::ios::binary) << contents_;
    fd_ = UniqueFd(::open(path_.c_str(), O_RDONLY | O_CLOEXEC));
    ASSERT_TRUE(fd_);
  }
  void TearDown() override { ::unlink(path_.c_str()); }

  const std::string contents_ = std::string(100000, 'a') + "0123456789";
  std::string path_;
  UniqueFd fd_;
};

TEST_F(PreadTest, ReadsWhatIsAskedAtTheOffset) {
  char out[10] = {};
  ASSERT_TRUE(pread_exact(fd_.get(), out, sizeof out, 100000));
  EXPECT_EQ(std::string(out, sizeof out), "0123456789");
  std::string whole(contents_.size(), '\0');
  EXPECT_EQ(pread_up_to(fd_.get(), whole.data(), whole.size(), 0), contents_.size());
  EXPECT_EQ(whole, contents_);
}

TEST_F(PreadTest, AtTheEndWhatThereIsAndNotExactly) {
  char out[16] = {};
  EXPECT_EQ(pread_up_to(fd_.get(), out, sizeof out, 100005), 5u);
  EXPECT_EQ(std::string(out, 5), "56789");
  EXPECT_FALSE(pread_exact(fd_.get(), out, sizeof out, 100005));
  EXPECT_EQ(pread_up_to(fd_.get(), out, sizeof out, 1 << 30), 0u);
  EXPECT_TRUE(pread_exact(fd_.get(), out, 0, 1 << 30));  // nothing asked, nothing missing
}

TEST(Pread, NothingFromWhatHasNoOffsets) {
  int pipe_fds[2];
  ASSERT_EQ(::pipe(pipe_fds), 0);
  const UniqueFd read_end(pipe_fds[0]), write_end(pipe_fds[1]);
  ASSERT_EQ(::write(write_end.get(), "xyz", 3), 3);
  char out[3];
  EXPECT_EQ(pread_up_to(read_end.get(), out, sizeof out, 0), 0u);
  EXPECT_FALSE(pread_exact(-1, out, sizeof out, 0));
}

}  // namespace
}  // namespace bpfprof
