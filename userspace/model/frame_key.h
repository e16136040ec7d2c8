// The frames of the model's resolved stacks: what each is (a native address in a library,
// kernel code, a runtime's function, a pseudo-frame) and the tree the stacks share.
#pragma once

#include <cstdint>
#include <functional>
#include <type_traits>

#include "userspace/model/ids.h"
#include "userspace/model/prefix_tree.h"
#include "userspace/model/recording.h"
#include "userspace/model/thread_accounting.h"

namespace bpfprof {

// The library of kernel frames (the first library of every model).
inline constexpr LibId kKernelLib{0};

// What a frame of a resolved stack is; the kind decides what its library and address mean,
// so that no library id doubles as a marker.
enum class FrameKind : uint8_t {
  kNative,       // code in a mapped file or a process's [anon] memory: `lib`, file offset
  kKernel,       // kernel code: `lib` is kKernelLib, the address is absolute
  kUnmapped,     // a user address outside any executable mapping (often a frame-pointer walk
                 // gone astray): absolute, no library
  kOffCpuState,  // a pseudo-frame naming why the thread is off the CPU (off_cpu_state())
  kTruncated,    // the pseudo-frame the profile writer puts at the root of a user stack that
                 // does not reach a thread root (the model never makes one itself)
  kRuntime,      // a runtime's function at a line (Python, ...): the address is the
                 // recording's RuntimeFrameId
  kExec,         // the root of a sample taken inside execve once the old image was gone:
                 // there is no user stack (kExecRawFrame)
};

// One frame before symbolization. For a library, `address` is the offset in the file;
// for the kernel and for addresses outside any mapping it is the absolute address.
// Return addresses are already nudged (minus one) into their call instruction.
struct FrameKey {
  FrameKind kind = FrameKind::kUnmapped;
  LibId lib{};  // meaningful for kNative and kKernel only
  uint64_t address = 0;

  static constexpr FrameKey native(LibId lib, uint64_t file_offset) {
    return {FrameKind::kNative, lib, file_offset};
  }
  static constexpr FrameKey kernel(uint64_t address) {
    return {FrameKind::kKernel, kKernelLib, address};
  }
  static constexpr FrameKey unmapped(uint64_t address) {
    return {FrameKind::kUnmapped, LibId{}, address};
  }
  static constexpr FrameKey off_cpu(OffCpuState state) {
    return {FrameKind::kOffCpuState, LibId{}, static_cast<uint64_t>(state)};
  }
  static constexpr FrameKey truncated() { return {FrameKind::kTruncated, LibId{}, 0}; }
  static constexpr FrameKey exec() { return {FrameKind::kExec, LibId{}, 0}; }
  static constexpr FrameKey runtime(RuntimeFrameId frame) {
    return {FrameKind::kRuntime, LibId{}, frame.value};
  }

  bool is_off_cpu_state() const { return kind == FrameKind::kOffCpuState; }
  OffCpuState off_cpu_state() const { return static_cast<OffCpuState>(address); }
  RuntimeFrameId runtime_frame() const { return RuntimeFrameId{static_cast<uint32_t>(address)}; }
  bool operator==(const FrameKey&) const = default;
};
struct FrameKeyHash {
  size_t operator()(const FrameKey& k) const noexcept {
    const uint64_t tag = static_cast<uint64_t>(k.kind) << 32 | static_cast<uint32_t>(k.lib.value);
    return std::hash<uint64_t>{}(k.address * 31 + tag);
  }
};
using ResolvedStackTree = PrefixTree<FrameKey, FrameKeyHash>;
static_assert(std::is_same_v<StackId, ResolvedStackTree::NodeId>);

}  // namespace bpfprof
