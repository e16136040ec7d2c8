// DwarfUnwinder (libdwfl over a stack copy) on this test's own stack: the registers and a copy
// of the stack taken three calls deep, the executable mappings of /proc/self/maps; the frames
// it finds must be the return addresses the functions saw themselves.
#include "symbols/dwarf/unwinder.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "bpf/events.h"
#include "bpf/unwind_table.h"
#include "symbols/util/proc_maps.h"
#include "userspace/capture/event_decoder.h"

// crti.o's _init of this test executable: a crt stub without CFI (symbols/dwarf/crt_stubs.h).
extern "C" void _init();

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
  // ip: just past a call instruction (as a return address would be); sp is as before it.
  asm volatile("call 1f\n1:\tpop %0\n\tmov %%rsp, %1\n\tmov %%rbp, %2"
               : "=r"(ip), "=r"(sp), "=r"(bp));
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

// ---- Frames in a crt stub (_init, no CFI): built on a real snapshot by pushing what the stub
// and its callee would have pushed, so that the walk past the stub must reach the same frames.

uint64_t address_of(void (*function)()) { return reinterpret_cast<uint64_t>(function); }

// Unwinds the snapshot with `words` pushed below its sp (the first word lowest) and the pc at
// `ip`, as if the thread had gone on from the snapshot into code that pushed them.
UnwoundStack unwind_pushed(const Snapshot& s, uint64_t ip, const std::vector<uint64_t>& words,
                           uint64_t ax = 0) {
  std::vector<uint8_t> stack(words.size() * 8);
  memcpy(stack.data(), words.data(), stack.size());
  stack.insert(stack.end(), s.stack.begin(), s.stack.end());
  UserRegisters registers =
      UserRegisters::with_ip_sp_bp(ip, s.registers.sp() - words.size() * 8, s.registers.bp());
  registers.dwarf[UserRegisters::kAx] = ax;
  DwarfUnwinder unwinder;
  add_executable_mappings(unwinder);
  return unwinder.unwind(getpid(), gettid(), registers, stack.data(), stack.size(), 64);
}

// pcs[from] on are a return address into the snapshot's function, then its own return addresses.
void expect_snapshot_frames(const UnwoundStack& unwound, size_t from, const Snapshot& s) {
  ASSERT_GE(unwound.pcs.size(), from + 4) << "the walk stopped in the stub";
  EXPECT_EQ(unwound.pcs[from], s.registers.ip() + 1);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(unwound.pcs[from + 1 + i], s.return_addresses[i]) << i;
}

// As a library's _init is sampled in the page fault of its first instruction: only the return
// address pushed. Here it "returns" into the snapshot's function, whose rules are known.
TEST(DwarfUnwinder, WalksOnFromTheFirstInstructionOfInit) {
  const Snapshot s = snapshot_three_deep();
  const UnwoundStack unwound = unwind_pushed(s, address_of(_init), {s.registers.ip() + 1});
  ASSERT_FALSE(unwound.pcs.empty());
  EXPECT_EQ(unwound.pcs[0], address_of(_init));
  expect_snapshot_frames(unwound, 1, s);
}

// In its body, after `sub $8,%rsp`: the return address lies 8 bytes higher.
TEST(DwarfUnwinder, WalksOnFromTheBodyOfInit) {
  const Snapshot s = snapshot_three_deep();
  const UnwoundStack unwound =
      unwind_pushed(s, address_of(_init) + 4, {0x5a5a5a5a, s.registers.ip() + 1});
  expect_snapshot_frames(unwound, 1, s);
}

// A function that _init called (a constructor), sampled at its entry: libdwfl steps to the
// return address in _init's body, where it has no CFI, and the stub's rule goes on from there.
TEST(DwarfUnwinder, WalksThroughInitAsACaller) {
  const Snapshot s = snapshot_three_deep();
  const uint64_t return_into_init = address_of(_init) + 0x12;  // after `call *%rax`
  const auto callee = reinterpret_cast<uint64_t>(&snapshot_three_deep);
  const UnwoundStack unwound =
      unwind_pushed(s, callee, {return_into_init, 0x5a5a5a5a, s.registers.ip() + 1});
  ASSERT_GE(unwound.pcs.size(), 2u);
  EXPECT_EQ(unwound.pcs[0], callee);
  EXPECT_EQ(unwound.pcs[1], return_into_init);
  expect_snapshot_frames(unwound, 2, s);
}

// Where a thread created by clone3 starts: just past the syscall in this process's libc.
uint64_t clone3_child_entry() {
  for (const MapEntry& m : read_proc_maps(getpid()).value_or(std::vector<MapEntry>{})) {
    if (!m.executable || m.path.find("/libc.so") == std::string::npos) continue;
    const auto* code = reinterpret_cast<const uint8_t*>(m.start);
    for (uint64_t i = 0; i + BPFPROF_CLONE_CODE_BYTES <= m.end - m.start; ++i)
      if (bpfprof_is_clone_child_entry(code + i)) return m.start + i + 2;
  }
  return 0;
}

// A new thread's first moment: its stack is new (or a reused one's old frames), nothing of it
// a caller. The walk ends at clone's pc, as the kernel walk does, instead of reading on.
TEST(DwarfUnwinder, StopsAtTheChildSideOfClone) {
  const uint64_t child = clone3_child_entry();
  ASSERT_NE(child, 0u);
  const Snapshot s = snapshot_three_deep();
  // A stale return address where the child's sp points, as in a reused thread stack.
  const UnwoundStack unwound = unwind_pushed(s, child, {s.registers.ip() + 1}, /*ax=*/0);
  ASSERT_EQ(unwound.pcs.size(), 1u);
  EXPECT_EQ(unwound.pcs[0], child);
}

// The parent at the same pc (rax its child's tid; or -ENOSYS, still in the syscall): clone3
// pushed nothing, and without CFI there libdwfl would stop. It goes on to the caller whose
// return address is at sp, as the kernel walk does.
TEST(DwarfUnwinder, LeavesTheParentSideOfCloneToItsCaller) {
  const uint64_t child = clone3_child_entry();
  ASSERT_NE(child, 0u);
  const Snapshot s = snapshot_three_deep();
  // As if take_snapshot had called clone3 where the snapshot was taken (just past a call).
  for (uint64_t ax : {uint64_t{4242}, static_cast<uint64_t>(-38)}) {
    const UnwoundStack unwound = unwind_pushed(s, child, {s.registers.ip()}, ax);
    ASSERT_GE(unwound.pcs.size(), 5u) << "stopped in clone3";
    EXPECT_EQ(unwound.pcs[0], child);
    EXPECT_EQ(unwound.pcs[1], s.registers.ip());
    for (size_t i = 0; i < 3; ++i) EXPECT_EQ(unwound.pcs[2 + i], s.return_addresses[i]) << i;
  }
}

// ---- Through the event decoder: a stack copy event of this process, unwound when its exit
// has been read already (the copy's ring is read in parts at high rates).

std::unique_ptr<bpfprof_copy_event> sample_event(const Snapshot& s, uint64_t time, size_t* size) {
  auto e = std::make_unique<bpfprof_copy_event>();
  memset(e.get(), 0, sizeof(*e));
  e->head.header =
      bpfprof_event_header{BPFPROF_EVENT_STACK, 0, time, static_cast<uint32_t>(getpid()),
                           static_cast<uint32_t>(gettid())};
  e->head.context = BPFPROF_CONTEXT_SAMPLE;
  e->head.payload = BPFPROF_PAYLOAD_COPY;
  memcpy(e->user_regs, s.registers.dwarf.data(), sizeof e->user_regs);
  e->stack_size = static_cast<uint32_t>(std::min(s.stack.size(), sizeof e->stack));
  memcpy(e->stack, s.stack.data(), e->stack_size);
  *size = offsetof(bpfprof_copy_event, stack) + e->stack_size;
  return e;
}

void decode_exit(EventDecoder& decoder, uint64_t time, Recording& rec) {
  bpfprof_exit_event exit;
  memset(&exit, 0, sizeof exit);
  exit.header = bpfprof_event_header{BPFPROF_EVENT_EXIT, 0, time, static_cast<uint32_t>(getpid()),
                                     static_cast<uint32_t>(getpid())};
  exit.group_dead = 1;
  decoder.decode(&exit, sizeof exit, rec);
}

// The frames of the last sample decoded.
size_t last_sample_frames(const Recording& rec) {
  return rec.raw_stacks.leaf_to_root(rec.samples.back().stack).size();
}

TEST(EventDecoder, SamplesReadAfterTheirProcesssExitAreUnwoundWithItsMappings) {
  const Snapshot s = snapshot_three_deep();
  DwarfUnwinder unwinder;
  EventDecoder decoder(&unwinder);
  Recording rec;
  std::vector<LifecycleEvent> mappings;
  for (const MapEntry& m : read_proc_maps(getpid()).value_or(std::vector<MapEntry>{}))
    if (m.executable && m.kind() == MappingKind::kFile)
      mappings.push_back({MonotonicNs{10}, MmapEvent{Pid{getpid()}, Tid{getpid()},
                                                     MappingInfo{.start = m.start,
                                                                 .length = m.end - m.start,
                                                                 .file_offset = m.file_offset,
                                                                 .path = m.path}}});
  decoder.queue_address_space_changes(mappings, 0);
  decode_exit(decoder, 1000, rec);
  // The batch ends with the samples before the exit still in their ring.
  decoder.forget_exited_processes(MonotonicNs{1500});
  size_t size = 0;
  auto before_exit = sample_event(s, 900, &size);
  decoder.decode(before_exit.get(), size, rec);
  ASSERT_EQ(rec.samples.size(), 1u);
  EXPECT_GE(last_sample_frames(rec), 4u) << "unwound without the process's mappings";
  // Long after its exit, it is forgotten.
  decoder.forget_exited_processes(MonotonicNs{1000 + EventDecoder::kExitedProcessGraceNs + 1});
  auto late = sample_event(s, 2000, &size);
  decoder.decode(late.get(), size, rec);
  EXPECT_EQ(last_sample_frames(rec), 1u);
}

// Its pid used again by a new process (a fork from a process with no mappings known) before
// the old one is forgotten: the new one does not inherit the old one's mappings.
TEST(EventDecoder, AReusedPidDoesNotKeepTheExitedProcesssMappings) {
  const Snapshot s = snapshot_three_deep();
  DwarfUnwinder unwinder;
  add_executable_mappings(unwinder);
  EventDecoder decoder(&unwinder);
  Recording rec;
  decode_exit(decoder, 1000, rec);
  decoder.forget_exited_processes(MonotonicNs{1100});
  decoder.queue_address_space_changes(
      {{MonotonicNs{1200}, ForkEvent{Pid{1}, Tid{1}, Pid{getpid()}, Tid{getpid()}}}}, 0);
  size_t size = 0;
  auto reused = sample_event(s, 1300, &size);
  decoder.decode(reused.get(), size, rec);
  ASSERT_EQ(rec.samples.size(), 1u);
  EXPECT_EQ(last_sample_frames(rec), 1u);
}

}  // namespace
}  // namespace bpfprof
