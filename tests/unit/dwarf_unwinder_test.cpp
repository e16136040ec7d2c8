// DwarfUnwinder (libdwfl over a stack copy) on this test's own stack: the registers and a copy
// of the stack taken three calls deep, the executable mappings of /proc/self/maps; the frames
// it finds must be the return addresses the functions saw themselves.
#include "symbols/dwarf/unwinder.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "symbols/util/proc_maps.h"

namespace bpfprof {
namespace {

struct Snapshot {
  UserRegisters registers;
  std::vector<uint8_t> stack;
  std::vector<uint64_t> return_addresses;  // innermost first, as each function saw its own
};

// The end of the mapping holding `address` (the stack's top).
uint64_t mapping_end(uint64_t address) {
  for (const MapEntry& m : read_proc_maps(getpid()).value_or(std::vector<MapEntry>{}))
    if (m.contains(address)) return m.end;
  return address;
}

void add_executable_mappings(DwarfUnwinder& unwinder) {
  for (const MapEntry& m : read_proc_maps(getpid()).value_or(std::vector<MapEntry>{}))
    if (m.executable && m.kind() == MappingKind::kFile)
      unwinder.add_mapping(getpid(), m.start, m.end, m.file_offset, MappedFile{m.path, nullptr});
}

// The registers here, and the stack from sp to its top (at most 64 KiB). What this function
// does after reading them only touches its own locals and the stack below sp.
[[gnu::noinline]] void take_snapshot(Snapshot& s) {
  uint64_t ip = 0, sp = 0, bp = 0;
  asm volatile("lea 0(%%rip), %0\n\tmov %%rsp, %1\n\tmov %%rbp, %2" : "=r"(ip), "=r"(sp), "=r"(bp));
  s.registers = UserRegisters::with_ip_sp_bp(ip, sp, bp);
  const uint64_t size = std::min<uint64_t>(mapping_end(sp) - sp, 64 << 10);
  const auto* bytes = reinterpret_cast<const uint8_t*>(sp);
  s.stack.assign(bytes, bytes + size);
  s.return_addresses.push_back(reinterpret_cast<uint64_t>(__builtin_return_address(0)));
}

[[gnu::noinline]] void level2(Snapshot& s) {
  take_snapshot(s);
  s.return_addresses.push_back(reinterpret_cast<uint64_t>(__builtin_return_address(0)));
  asm volatile("" ::: "memory");  // no tail call: this frame stays
}

[[gnu::noinline]] void level1(Snapshot& s) {
  level2(s);
  s.return_addresses.push_back(reinterpret_cast<uint64_t>(__builtin_return_address(0)));
  asm volatile("" ::: "memory");
}

Snapshot snapshot_three_deep() {
  Snapshot s;
  level1(s);
  return s;
}

TEST(DwarfUnwinder, FindsTheReturnAddressesOfItsOwnStack) {
  const Snapshot s = snapshot_three_deep();
  ASSERT_EQ(s.return_addresses.size(), 3u);
  DwarfUnwinder unwinder;
  add_executable_mappings(unwinder);
  const UnwoundStack unwound =
      unwinder.unwind(getpid(), gettid(), s.registers, s.stack.data(), s.stack.size(), 64);
  ASSERT_GE(unwound.pcs.size(), 4u);
  EXPECT_EQ(unwound.pcs[0], s.registers.ip());
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(unwound.pcs[i + 1], s.return_addresses[i]) << i;
  // Beyond them: the test framework's frames, up to the thread's root.
  EXPECT_GT(unwound.pcs.size(), 6u);
}

TEST(DwarfUnwinder, ACopyCutShortSaysHowMuchMoreItNeeded) {
  const Snapshot s = snapshot_three_deep();
  DwarfUnwinder unwinder;
  add_executable_mappings(unwinder);
  const UnwoundStack unwound =
      unwinder.unwind(getpid(), gettid(), s.registers, s.stack.data(), 8, 64);
  ASSERT_FALSE(unwound.pcs.empty());
  EXPECT_EQ(unwound.pcs[0], s.registers.ip());
  // take_snapshot's own frame is larger than 8 bytes: its return address lies above them.
  EXPECT_LE(unwound.pcs.size(), 1u);
  EXPECT_GT(unwound.stack_bytes_needed, 8u);
}

TEST(DwarfUnwinder, WithoutMappingsOnlyThePcIsKnown) {
  const Snapshot s = snapshot_three_deep();
  DwarfUnwinder unwinder;
  add_executable_mappings(unwinder);
  unwinder.reset(getpid());  // an exec: nothing known of the new image yet
  const UnwoundStack unwound =
      unwinder.unwind(getpid(), gettid(), s.registers, s.stack.data(), s.stack.size(), 64);
  ASSERT_EQ(unwound.pcs.size(), 1u);
  EXPECT_EQ(unwound.pcs[0], s.registers.ip());
}

}  // namespace
}  // namespace bpfprof
