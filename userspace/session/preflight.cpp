#include "userspace/session/preflight.h"

#include <sys/utsname.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>

namespace bpfprof {

namespace {

constexpr int kCapSysAdmin = 21;
constexpr int kCapPerfmon = 38;
constexpr int kCapBpf = 39;

bool has(uint64_t capabilities, int bit) { return (capabilities >> bit) & 1; }

}  // namespace

PreflightEnvironment current_environment() {
  PreflightEnvironment env;
  env.effective_uid = geteuid();
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.starts_with("CapEff:"))
      env.effective_capabilities = std::stoull(line.substr(7), nullptr, 16);
  env.kernel_has_btf = access("/sys/kernel/btf/vmlinux", R_OK) == 0;
  utsname name{};
  if (uname(&name) == 0) env.kernel_release = name.release;
  return env;
}

std::optional<std::string> check_environment(const PreflightEnvironment& env) {
  const bool bpf_and_perfmon =
      (has(env.effective_capabilities, kCapBpf) && has(env.effective_capabilities, kCapPerfmon)) ||
      has(env.effective_capabilities, kCapSysAdmin);
  if (!bpf_and_perfmon)
    return env.effective_uid == 0 ? "running as root without CAP_BPF and CAP_PERFMON (or "
                                    "CAP_SYS_ADMIN): a container or "
                                    "capability bounding set takes them away; they are needed to "
                                    "load BPF programs and sample"
                                  : "needs root (or the capabilities CAP_BPF and CAP_PERFMON) to "
                                    "load BPF programs and "
                                    "sample: run it with sudo";
  int major = 0;
  int minor = 0;
  if (sscanf(env.kernel_release.c_str(), "%d.%d", &major, &minor) == 2 &&
      (major < kMinimumKernelMajor ||
       (major == kMinimumKernelMajor && minor < kMinimumKernelMinor)))
    return "kernel " + env.kernel_release + " is too old: bpfprof needs Linux " +
           std::to_string(kMinimumKernelMajor) + "." + std::to_string(kMinimumKernelMinor) +
           " or newer (bpf_find_vma, task storage, BTF tracepoints)";
  if (!env.kernel_has_btf)
    return "this kernel has no BTF type information (/sys/kernel/btf/vmlinux is missing): bpfprof "
           "needs a "
           "kernel built with CONFIG_DEBUG_INFO_BTF=y";
  return std::nullopt;
}

}  // namespace bpfprof
