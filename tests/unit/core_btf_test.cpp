// The minimal BTF made for the BPF objects' CO-RE relocations, against this machine's kernel
// BTF (/sys/kernel/btf/vmlinux, readable by anyone): the fields the walkers read are there at
// the kernel's offsets, much smaller than the kernel's BTF, and bad objects are refused.
#include "userspace/capture/core_btf.h"

#include <bpf/btf.h>
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "profiler.skel.h"
#include "walker.skel.h"

namespace bpfprof {
namespace {

using BtfPtr = std::unique_ptr<btf, decltype(&btf__free)>;

BtfPtr kernel_btf() { return BtfPtr(btf__load_vmlinux_btf(), &btf__free); }

std::span<const uint8_t> walker_elf() {
  size_t size = 0;
  const void* bytes = walker_bpf__elf_bytes(&size);
  return {static_cast<const uint8_t*>(bytes), size};
}

std::span<const uint8_t> main_elf() {
  size_t size = 0;
  const void* bytes = profiler_bpf__elf_bytes(&size);
  return {static_cast<const uint8_t*>(bytes), size};
}

// The member `name` of the struct `owner` in `types`: its bit offset and its type's kind.
std::optional<std::pair<uint32_t, int>> member(const btf& types, const char* owner,
                                               const char* name) {
  const int32_t id = btf__find_by_name_kind(&types, owner, BTF_KIND_STRUCT);
  if (id <= 0) return std::nullopt;
  const btf_type* t = btf__type_by_id(&types, id);
  for (uint16_t i = 0; i < btf_vlen(t); ++i) {
    if (std::strcmp(btf__name_by_offset(&types, btf_members(t)[i].name_off), name) != 0) continue;
    const btf_type* type = btf__type_by_id(&types, btf_members(t)[i].type);
    while (btf_is_mod(type) || btf_is_typedef(type)) type = btf__type_by_id(&types, type->type);
    return std::make_pair(btf_member_bit_offset(t, i), static_cast<int>(btf_kind(type)));
  }
  return std::nullopt;
}

TEST(CoreBtfTest, BothObjectsFieldsAtTheKernelsOffsetsInAFractionOfItsSize) {
  const BtfPtr kernel = kernel_btf();
  ASSERT_TRUE(kernel) << "no kernel BTF";
  const std::string bytes = minimal_core_btf(*kernel, {main_elf(), walker_elf()});
  const BtfPtr minimal(btf__new(bytes.data(), static_cast<uint32_t>(bytes.size())), &btf__free);
  ASSERT_TRUE(minimal) << "the minimal BTF does not parse";
  uint32_t kernel_size = 0;
  btf__raw_data(kernel.get(), &kernel_size);
  EXPECT_LT(bytes.size() * 20, kernel_size) << bytes.size() << " bytes of " << kernel_size;
  // Read by the walkers: a pointer, a bitfield, a member of an embedded struct's; by the
  // lifecycle programs only: a VMA's file and flags, a process's exit code.
  for (auto [owner, name] :
       {std::pair{"task_struct", "mm"}, std::pair{"task_struct", "in_execve"},
        std::pair{"task_struct", "se"}, std::pair{"sched_entity", "sum_exec_runtime"},
        std::pair{"pt_regs", "sp"}, std::pair{"vm_area_struct", "vm_file"},
        std::pair{"task_struct", "exit_code"}}) {
    const auto in_kernel = member(*kernel, owner, name);
    if (!in_kernel) continue;  // not in this kernel: nothing to compare
    const auto in_minimal = member(*minimal, owner, name);
    ASSERT_TRUE(in_minimal) << owner << "." << name;
    EXPECT_EQ(in_minimal->first, in_kernel->first) << owner << "." << name;
    // A pointer is a pointer to nothing: its pointee is not written.
    EXPECT_EQ(in_minimal->second, in_kernel->second) << owner << "." << name;
  }
}

TEST(CoreBtfTest, TracepointIdsAreTheKernelsTypedefs) {
  const BtfPtr kernel = kernel_btf();
  ASSERT_TRUE(kernel) << "no kernel BTF";
  const uint32_t id = tracepoint_btf_id(*kernel, "sched_switch");
  ASSERT_GT(id, 0u);
  EXPECT_STREQ(btf__name_by_offset(kernel.get(), btf__type_by_id(kernel.get(), id)->name_off),
               "btf_trace_sched_switch");
  EXPECT_EQ(tracepoint_btf_id(*kernel, "no_such_tracepoint"), 0u);
}

TEST(CoreBtfTest, AnObjectThatIsNoBpfElfIsRefused) {
  const BtfPtr kernel = kernel_btf();
  ASSERT_TRUE(kernel) << "no kernel BTF";
  const std::vector<uint8_t> garbage(4096, 0x5a);
  EXPECT_THROW(minimal_core_btf(*kernel, {garbage}), std::runtime_error);
  EXPECT_THROW(minimal_core_btf(*kernel, {walker_elf(), garbage}), std::runtime_error);
  // Cut short: the section headers are past the end.
  const std::span<const uint8_t> elf = walker_elf();
  EXPECT_THROW(minimal_core_btf(*kernel, {elf.first(elf.size() / 2)}), std::runtime_error);
}

}  // namespace
}  // namespace bpfprof
