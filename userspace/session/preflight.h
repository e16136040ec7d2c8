// Checks made before a recording starts, so that a machine or user that cannot record gets
// one clear line (and exit status 2) instead of a failure halfway through.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace bpfprof {

// What the checks look at; read from the running system by current_environment(), built
// by hand in tests.
struct PreflightEnvironment {
  uint32_t effective_uid = 0;
  uint64_t effective_capabilities = 0;  // CapEff of /proc/self/status
  bool kernel_has_btf = false;          // /sys/kernel/btf/vmlinux exists
  std::string kernel_release;           // uname -r
};

PreflightEnvironment current_environment();

// The first problem found, as one line without the "bpfprof: " prefix; nullopt when
// recording can go ahead.
std::optional<std::string> check_environment(const PreflightEnvironment& env);

// The oldest kernel the BPF programs load on: bpf_find_vma (5.17) is the newest helper used
// (task storage 5.11, ring buffers 5.8, tp_btf 5.5).
inline constexpr int kMinimumKernelMajor = 5;
inline constexpr int kMinimumKernelMinor = 17;

}  // namespace bpfprof
