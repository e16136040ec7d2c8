// The BPF programs' events (bpf/events.h) into the recording, without BPF: samples with
// their stacks root first, lifecycle events, and events cut short or of unknown kinds.
#include <gtest/gtest.h>

#include <cstring>
#include <variant>
#include <vector>

#include "bpf/events.h"
#include "userspace/capture/event_decoder.h"

namespace bpfprof {
namespace {

template <typename Event>
Event with_header(uint32_t kind, uint64_t time, uint32_t pid, uint32_t tid) {
  Event e;
  memset(&e, 0, sizeof e);
  e.header = bpfprof_event_header{kind, 1, time, pid, tid};
  return e;
}

// A stack event of `context` whose stacks come as `payload`.
template <typename Event>
Event stack_event(uint8_t context, uint8_t payload, uint64_t time, uint32_t pid, uint32_t tid) {
  Event e;
  memset(&e, 0, sizeof e);
  e.head.header = bpfprof_event_header{BPFPROF_EVENT_STACK, 1, time, pid, tid};
  e.head.context = context;
  e.head.payload = payload;
  return e;
}

bpfprof_frames_event sample(uint64_t time, uint32_t pid, uint32_t tid) {
  return stack_event<bpfprof_frames_event>(BPFPROF_CONTEXT_SAMPLE, BPFPROF_PAYLOAD_FP_FRAMES, time,
                                           pid, tid);
}

TEST(EventDecoder, ASampleBecomesARootFirstStackOfUserThenKernelFrames) {
  auto e = sample(100, 7, 8);
  e.head.cpu_time_ns = 5000;
  e.head.user_depth = 3;
  e.head.kernel_depth = 1;
  const uint64_t ips[] = {0x1003, 0x1002, 0x1001, 0xffffffff81000010ull};  // innermost first
  memcpy(e.ips, ips, sizeof ips);
  Recording rec;
  EventDecoder decoder;
  decoder.decode(&e, offsetof(bpfprof_frames_event, ips) + sizeof ips,
                 rec);  // only the used part is sent
  ASSERT_EQ(rec.samples.size(), 1u);
  const SampleRecord& s = rec.samples[0];
  EXPECT_EQ(s.time, MonotonicNs{100});
  EXPECT_EQ(s.pid, Pid{7});
  EXPECT_EQ(s.tid, Tid{8});
  EXPECT_EQ(s.cpu_time, CpuTimeNs{5000});
  EXPECT_EQ(rec.raw_stacks.leaf_to_root(s.stack),
            (std::vector<uint64_t>{0xffffffff81000010ull, 0x1003, 0x1002, 0x1001}));
  EXPECT_EQ(rec.stats.samples, 1u);
  EXPECT_EQ(rec.stats.first_sample_time, MonotonicNs{100});
}

// A frame-pointer walk that wanders into data: nothing beyond a non-canonical address.
TEST(EventDecoder, NonCanonicalUserAddressesEndTheUserStack) {
  auto e = sample(1, 7, 7);
  e.head.user_depth = 3;
  const uint64_t ips[] = {0x1003, 0xdead000000000000ull, 0x1001};
  memcpy(e.ips, ips, sizeof ips);
  Recording rec;
  EventDecoder().decode(&e, sizeof e, rec);
  ASSERT_EQ(rec.samples.size(), 1u);
  EXPECT_EQ(rec.raw_stacks.leaf_to_root(rec.samples[0].stack), (std::vector<uint64_t>{0x1003}));
}

TEST(EventDecoder, LifecycleEventsKeepTheirFields) {
  Recording rec;
  EventDecoder decoder;
  auto fork = with_header<bpfprof_fork_event>(BPFPROF_EVENT_FORK, 10, 7, 7);
  fork.child_pid = 9;
  fork.child_tid = 9;
  memcpy(fork.child_comm, "child", 6);
  decoder.decode(&fork, sizeof fork, rec);
  auto exec = with_header<bpfprof_exec_event>(BPFPROF_EVENT_EXEC, 11, 9, 9);
  exec.old_tid = 9;
  memcpy(exec.comm, "sort", 5);
  memset(exec.filename, 'x', sizeof exec.filename);  // no terminator: bounded, not overrun
  decoder.decode(&exec, sizeof exec, rec);
  auto exit = with_header<bpfprof_exit_event>(BPFPROF_EVENT_EXIT, 12, 9, 9);
  exit.cpu_time_ns = 77;
  exit.group_dead = 1;
  decoder.decode(&exit, sizeof exit, rec);
  ASSERT_EQ(rec.events.size(), 3u);
  const auto& f = std::get<ForkEvent>(rec.events[0].payload);
  EXPECT_EQ(f.child_pid, Pid{9});
  EXPECT_EQ(f.child_comm, "child");
  const auto& x = std::get<ExecEvent>(rec.events[1].payload);
  EXPECT_EQ(x.comm, "sort");
  EXPECT_EQ(x.filename.size(), sizeof exec.filename);
  const auto& d = std::get<ExitEvent>(rec.events[2].payload);
  EXPECT_TRUE(d.group_dead);
  EXPECT_EQ(d.cpu_time, CpuTimeNs{77});
}

TEST(EventDecoder, ShortUnknownAndUnwinderlessEventsAreDroppedNotMisread) {
  Recording rec;
  EventDecoder decoder;  // no unwinder: DWARF samples cannot be used
  auto fork = with_header<bpfprof_fork_event>(BPFPROF_EVENT_FORK, 10, 7, 7);
  for (size_t cut = 0; cut < sizeof fork; ++cut) decoder.decode(&fork, cut, rec);
  auto unknown = with_header<bpfprof_fork_event>(99, 10, 7, 7);
  decoder.decode(&unknown, sizeof unknown, rec);
  std::vector<uint8_t> copy(sizeof(bpfprof_copy_event));
  auto head =
      stack_event<bpfprof_frames_event>(BPFPROF_CONTEXT_SAMPLE, BPFPROF_PAYLOAD_COPY, 1, 7, 7).head;
  memcpy(copy.data(), &head, sizeof head);
  decoder.decode(copy.data(), copy.size(), rec);
  // A context or a payload this decoder does not know.
  auto frames = sample(1, 7, 7);
  for (size_t cut = 0; cut < offsetof(bpfprof_frames_event, ips); ++cut)
    decoder.decode(&frames, cut, rec);
  frames.head.context = 9;
  decoder.decode(&frames, sizeof frames, rec);
  frames = sample(1, 7, 7);
  frames.head.payload = 9;
  decoder.decode(&frames, sizeof frames, rec);
  EXPECT_TRUE(rec.events.empty());
  EXPECT_TRUE(rec.samples.empty());
}

TEST(EventDecoder, SwitchOutsCarryTheirStateAndSwitchInsNoStack) {
  Recording rec;
  EventDecoder decoder;
  auto out = stack_event<bpfprof_frames_event>(BPFPROF_CONTEXT_SWITCH_OUT,
                                               BPFPROF_PAYLOAD_UNWOUND_FRAMES, 5, 7, 7);
  out.head.state = BPFPROF_OFF_CPU_IO_WAIT;
  out.head.flags = BPFPROF_SWITCH_STACK_REUSED;
  decoder.decode(&out, offsetof(bpfprof_frames_event, ips), rec);
  auto in = bpfprof_event_header{BPFPROF_EVENT_SWITCH_IN, 0, 6, 7, 7};
  decoder.decode(&in, sizeof in, rec);
  ASSERT_EQ(rec.samples.size(), 2u);
  EXPECT_EQ(rec.samples[0].kind, SampleKind::kSwitchOut);
  EXPECT_EQ(rec.samples[0].off_cpu_state, OffCpuState::kIoWait);
  EXPECT_TRUE(rec.samples[0].reuses_last_stack);
  EXPECT_EQ(rec.samples[1].kind, SampleKind::kSwitchIn);
  EXPECT_EQ(rec.stats.switch_outs, 1u);
  EXPECT_EQ(rec.stats.samples, 0u);
}

bpfprof_waking_event waking(uint64_t time, uint32_t wakee, uint32_t waker, uint32_t flags) {
  auto e = with_header<bpfprof_waking_event>(BPFPROF_EVENT_WAKING, time, wakee, wakee);
  e.waker_pid = waker;
  e.waker_tid = waker;
  e.context = BPFPROF_WAKER_TASK;
  e.flags = flags;
  strcpy(e.waker_comm, "producer");
  return e;
}

bpfprof_frames_event waker_stack(uint64_t time, uint32_t waker) {
  return stack_event<bpfprof_frames_event>(BPFPROF_CONTEXT_WAKER, BPFPROF_PAYLOAD_UNWOUND_FRAMES,
                                           time, waker, waker);
}

// The waker's stack comes in an event of its own, matched by CPU and time; a waking of the
// same pair within an interval reuses the stack taken last.
TEST(EventDecoder, AWakingTakesTheWakerStackThatFollowsItOrTheLastOneOfThePair) {
  Recording rec;
  EventDecoder decoder;
  auto first = waking(10, 7, 9, BPFPROF_WAKER_STACK_FOLLOWS);
  decoder.decode(&first, sizeof first, rec);
  EXPECT_TRUE(rec.samples.empty());  // until its stack comes
  auto stack = waker_stack(10, 9);
  stack.head.user_depth = 2;
  stack.head.kernel_depth = 1;
  const uint64_t ips[] = {0x2002, 0x2001, 0xffffffff81000020ull};
  memcpy(stack.ips, ips, sizeof ips);
  decoder.decode(&stack, offsetof(bpfprof_frames_event, ips) + sizeof ips, rec);
  auto second = waking(20, 7, 9, BPFPROF_WAKER_STACK_REUSED);
  decoder.decode(&second, sizeof second, rec);
  ASSERT_EQ(rec.samples.size(), 2u);
  for (const SampleRecord& s : rec.samples) {
    EXPECT_EQ(s.kind, SampleKind::kWaking);
    EXPECT_EQ(s.tid, Tid{7});
    const Waker& w = rec.wakers[s.waker];
    EXPECT_EQ(w.context, WakerContext::kThread);
    EXPECT_EQ(w.tid, Tid{9});
    EXPECT_EQ(w.comm, "producer");
    EXPECT_EQ(rec.raw_stacks.leaf_to_root(s.stack),
              (std::vector<uint64_t>{0xffffffff81000020ull, 0x2002, 0x2001}));
  }
  EXPECT_EQ(rec.samples[0].waker, rec.samples[1].waker);
  EXPECT_EQ(rec.stats.wakings.wakings, 2u);
  EXPECT_EQ(rec.stats.wakings.stacks_taken, 1u);
  EXPECT_EQ(rec.stats.wakings.stacks_reused, 1u);
}

TEST(EventDecoder, AWakingWhoseStackNeverCameIsKeptWithoutOne) {
  Recording rec;
  EventDecoder decoder;
  auto first = waking(10, 7, 9, BPFPROF_WAKER_STACK_FOLLOWS);
  auto second = waking(11, 7, 9, BPFPROF_WAKER_STACK_FOLLOWS);
  decoder.decode(&first, sizeof first, rec);
  decoder.decode(&second, sizeof second, rec);
  ASSERT_EQ(rec.samples.size(), 1u);
  EXPECT_EQ(rec.samples[0].time, MonotonicNs{10});
  EXPECT_EQ(rec.samples[0].stack, RawStackTree::kRoot);
  EXPECT_EQ(rec.stats.wakings.stacks_missing, 1u);
  // A stack of another time is not the pending waking's.
  auto stack = waker_stack(12, 9);
  decoder.decode(&stack, offsetof(bpfprof_frames_event, ips), rec);
  EXPECT_EQ(rec.samples.size(), 1u);
  auto cut = waking(13, 7, 9, 0);
  decoder.decode(&cut, sizeof cut - 1, rec);  // truncated: ignored
  EXPECT_EQ(rec.stats.wakings.wakings, 2u);
}

// The context makes the record, whatever form the stack came in; a walk in the kernel is
// counted as such, in its context's figures.
TEST(EventDecoder, ContextMakesTheRecordAndPayloadTheStack) {
  Recording rec;
  EventDecoder decoder;
  const uint64_t ips[] = {0x3002, 0x3001};
  for (uint8_t payload : {BPFPROF_PAYLOAD_FP_FRAMES, BPFPROF_PAYLOAD_UNWOUND_FRAMES}) {
    for (uint8_t context : {BPFPROF_CONTEXT_SAMPLE, BPFPROF_CONTEXT_SWITCH_OUT}) {
      auto e = stack_event<bpfprof_frames_event>(context, payload, 10, 7, 7);
      e.head.user_depth = 2;
      e.head.state = BPFPROF_OFF_CPU_SLEEPING;
      memcpy(e.ips, ips, sizeof ips);
      decoder.decode(&e, offsetof(bpfprof_frames_event, ips) + sizeof ips, rec);
    }
  }
  ASSERT_EQ(rec.samples.size(), 4u);
  for (size_t i = 0; i < rec.samples.size(); ++i) {
    EXPECT_EQ(rec.samples[i].kind, i % 2 ? SampleKind::kSwitchOut : SampleKind::kOnCpu);
    EXPECT_EQ(rec.raw_stacks.leaf_to_root(rec.samples[i].stack),
              (std::vector<uint64_t>{0x3002, 0x3001}));
  }
  EXPECT_EQ(rec.stats.on_cpu_stacks.kernel, 1u);
  EXPECT_EQ(rec.stats.off_cpu_stacks.kernel, 1u);
  EXPECT_EQ(rec.stats.samples, 2u);
  EXPECT_EQ(rec.stats.switch_outs, 2u);
}

// Walks a second or more after the first sample are counted apart as well: the share once the
// tables of the processes running at the start are loaded.
TEST(EventDecoder, WalksAfterTheFirstSecondAreCountedApart) {
  Recording rec;
  EventDecoder decoder;
  const uint64_t ips[] = {0x3002, 0x3001};
  for (uint64_t time : {uint64_t{5'000}, uint64_t{900'005'000}, uint64_t{1'000'005'000}}) {
    auto e = stack_event<bpfprof_frames_event>(BPFPROF_CONTEXT_SAMPLE,
                                               BPFPROF_PAYLOAD_UNWOUND_FRAMES, time, 7, 7);
    e.head.user_depth = 2;
    memcpy(e.ips, ips, sizeof ips);
    decoder.decode(&e, offsetof(bpfprof_frames_event, ips) + sizeof ips, rec);
  }
  EXPECT_EQ(rec.stats.on_cpu_stacks.kernel, 3u);
  EXPECT_EQ(rec.stats.on_cpu_stacks.kernel_settled, 1u);
  EXPECT_EQ(rec.stats.on_cpu_stacks.copied_settled, 0u);
}

TEST(EventDecoder, OnlyStackCopiesAreUnwoundAsTheyAreDecoded) {
  auto copy =
      stack_event<bpfprof_frames_event>(BPFPROF_CONTEXT_WAKER, BPFPROF_PAYLOAD_COPY, 1, 7, 7).head;
  EXPECT_TRUE(EventDecoder::unwinds_in_userspace(&copy, sizeof copy));
  EXPECT_FALSE(EventDecoder::unwinds_in_userspace(&copy, sizeof copy - 1));
  auto frames = sample(1, 7, 7);
  EXPECT_FALSE(EventDecoder::unwinds_in_userspace(&frames, sizeof frames));
  auto waking_event = waking(1, 7, 9, 0);
  EXPECT_FALSE(EventDecoder::unwinds_in_userspace(&waking_event, sizeof waking_event));
}

}  // namespace
}  // namespace bpfprof
