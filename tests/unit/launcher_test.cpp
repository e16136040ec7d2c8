// Who a command runs as under sudo: sudo's variables are checked, never trusted blindly.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <stdexcept>

#include "userspace/session/launcher.h"

namespace bpfprof {
namespace {

struct SudoVariables {
  SudoVariables(const char* uid, const char* gid) {
    setenv("SUDO_UID", uid, 1);
    setenv("SUDO_GID", gid, 1);
  }
  ~SudoVariables() {
    unsetenv("SUDO_UID");
    unsetenv("SUDO_GID");
  }
};

TEST(SudoInvokingUser, AGroupIdThatIsNotANumberIsAnErrorNotRoot) {
  if (geteuid() != 0) {
    if (getenv("CI") && std::string(getenv("CI")) == "true") FAIL() << "needs root under CI=true";
    GTEST_SKIP() << "sudo_invoking_user only applies to root";
  }
  {
    SudoVariables sudo("65534", "65534");
    std::optional<RunAsUser> user = sudo_invoking_user();
    ASSERT_TRUE(user.has_value());
    EXPECT_EQ(user->uid, 65534u);
    EXPECT_EQ(user->gid, 65534u);
  }
  for (const char* garbage : {"12abc", "-1", "4294967295", " 5"}) {
    SudoVariables sudo("65534", garbage);
    EXPECT_THROW(sudo_invoking_user(), std::runtime_error) << garbage;
  }
  {
    SudoVariables sudo("65534", "");  // unset or empty: the user's own group
    EXPECT_EQ(sudo_invoking_user()->gid, 65534u);
  }
}

}  // namespace
}  // namespace bpfprof
