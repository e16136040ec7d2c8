#include <gtest/gtest.h>

#include <unistd.h>

#include "userspace/session/preflight.h"

namespace bpfprof {
namespace {

constexpr uint64_t kBpf = uint64_t{1} << 39;
constexpr uint64_t kPerfmon = uint64_t{1} << 38;
constexpr uint64_t kSysAdmin = uint64_t{1} << 21;

PreflightEnvironment good() {
  return PreflightEnvironment{0, kBpf | kPerfmon | kSysAdmin, true, "6.18.0"};
}

TEST(Preflight, AGoodMachinePasses) {
  EXPECT_FALSE(check_environment(good()));
  PreflightEnvironment only_bpf_perfmon = good();
  only_bpf_perfmon.effective_uid = 1000;
  only_bpf_perfmon.effective_capabilities = kBpf | kPerfmon;
  EXPECT_FALSE(check_environment(only_bpf_perfmon));
}

TEST(Preflight, AnUnprivilegedUserIsToldToUseSudo) {
  PreflightEnvironment env = good();
  env.effective_uid = 1000;
  env.effective_capabilities = kBpf;  // CAP_PERFMON missing
  auto error = check_environment(env);
  ASSERT_TRUE(error);
  EXPECT_NE(error->find("needs root"), std::string::npos) << *error;
  EXPECT_NE(error->find("sudo"), std::string::npos) << *error;
  EXPECT_EQ(error->find('\n'), std::string::npos);
}

TEST(Preflight, RootWithoutCapabilitiesIsExplained) {
  PreflightEnvironment env = good();
  env.effective_capabilities = 0;
  auto error = check_environment(env);
  ASSERT_TRUE(error);
  EXPECT_NE(error->find("without CAP_BPF and CAP_PERFMON"), std::string::npos) << *error;
}

TEST(Preflight, OldKernelsAndKernelsWithoutBtfAreRefused) {
  PreflightEnvironment old = good();
  old.kernel_release = "5.15.0-91-generic";
  auto error = check_environment(old);
  ASSERT_TRUE(error);
  EXPECT_NE(error->find("5.15.0-91-generic is too old"), std::string::npos) << *error;
  EXPECT_NE(error->find("5.17"), std::string::npos);
  old.kernel_release = "4.19.0";
  EXPECT_TRUE(check_environment(old));
  PreflightEnvironment new_enough = good();
  new_enough.kernel_release = "5.17.3";
  EXPECT_FALSE(check_environment(new_enough));

  PreflightEnvironment no_btf = good();
  no_btf.kernel_has_btf = false;
  error = check_environment(no_btf);
  ASSERT_TRUE(error);
  EXPECT_NE(error->find("CONFIG_DEBUG_INFO_BTF"), std::string::npos) << *error;
}

TEST(Preflight, ThisMachinePassesWhenRoot) {
  if (geteuid() != 0) GTEST_SKIP() << "not root";
  EXPECT_FALSE(check_environment(current_environment()));
}

}  // namespace
}  // namespace bpfprof
