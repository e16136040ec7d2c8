// IngestPipeline: a stack copy newer than the last read of the side band has the side band
// read before it is unwound (its process's libraries may have been mapped just before it).
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <vector>

#include "bpf/events.h"
#include "userspace/capture/ingest.h"

namespace bpfprof {
namespace {

template <typename Event>
std::unique_ptr<Event> event(uint8_t context, uint8_t payload, uint64_t time) {
  auto e = std::make_unique<Event>();
  memset(e.get(), 0, sizeof(Event));
  e->head.header = bpfprof_event_header{BPFPROF_EVENT_STACK, 0, time, 42, 42};
  e->head.context = context;
  e->head.payload = payload;
  return e;
}

struct SideBandFixture {
  Recording recording;
  IngestPipeline pipeline{recording, {.dwarf = true, .live_processes = false}};
  int reads = 0;
  // Samples decoded when the pipeline took the mappings each read returned.
  std::vector<size_t> samples_when_mapped;

  SideBandFixture() {
    pipeline.observe_lifecycle_events(
        [this](const std::vector<LifecycleEvent>& events, size_t from) {
          for (size_t i = from; i < events.size(); ++i)
            if (std::holds_alternative<MmapEvent>(events[i].payload))
              samples_when_mapped.push_back(recording.samples.size());
        });
    pipeline.read_lifecycle_with([this] {
      ++reads;
      MmapEvent mmap;
      mmap.pid = Pid{42};
      recording.events.push_back(LifecycleEvent{MonotonicNs{1000}, mmap});
      pipeline.lifecycle_read_until(MonotonicNs{2000});  // the read began then
    });
    pipeline.lifecycle_read_until(MonotonicNs{1000});
  }

  template <typename Event>
  void take(uint8_t context, uint8_t payload, uint64_t time) {
    auto e = event<Event>(context, payload, time);
    pipeline.take_bpf_event(e.get(), sizeof(Event));
  }
};

TEST(IngestPipeline, AStackCopyNewerThanTheLastSideBandReadHasTheSideBandReadFirst) {
  SideBandFixture f;
  f.take<bpfprof_copy_event>(BPFPROF_CONTEXT_SAMPLE, BPFPROF_PAYLOAD_COPY, 1500);
  EXPECT_EQ(f.reads, 1);
  ASSERT_EQ(f.samples_when_mapped.size(), 1u);
  EXPECT_EQ(f.samples_when_mapped[0], 0u);  // the mapping came before the sample was decoded
  EXPECT_EQ(f.recording.samples.size(), 1u);
  // Older than the read that followed: nothing more to read.
  f.take<bpfprof_copy_event>(BPFPROF_CONTEXT_SWITCH_OUT, BPFPROF_PAYLOAD_COPY, 1900);
  EXPECT_EQ(f.reads, 1);
  f.take<bpfprof_copy_event>(BPFPROF_CONTEXT_SAMPLE, BPFPROF_PAYLOAD_COPY, 2500);
  EXPECT_EQ(f.reads, 2);
}

TEST(IngestPipeline, StacksWalkedInTheKernelDoNotWaitForTheSideBand) {
  SideBandFixture f;
  // Resolved by the model after the reorder window, when every mapping is in.
  f.take<bpfprof_frames_event>(BPFPROF_CONTEXT_SAMPLE, BPFPROF_PAYLOAD_UNWOUND_FRAMES, 5000);
  f.take<bpfprof_frames_event>(BPFPROF_CONTEXT_SAMPLE, BPFPROF_PAYLOAD_FP_FRAMES, 5000);
  EXPECT_EQ(f.reads, 0);
  EXPECT_EQ(f.recording.samples.size(), 2u);
}

TEST(IngestPipeline, AStackCopyOlderThanTheLastSideBandReadIsUnwoundAtOnce) {
  SideBandFixture f;
  f.take<bpfprof_copy_event>(BPFPROF_CONTEXT_SAMPLE, BPFPROF_PAYLOAD_COPY, 999);
  EXPECT_EQ(f.reads, 0);
  EXPECT_EQ(f.recording.samples.size(), 1u);
}

// The -v line's counts (userspace/cli/summary.cpp): the user stacks taken, and of those the
// copies unwound here with their stack and event bytes; a walked stack is taken, not copied.
TEST(IngestPipeline, CopiesAreCountedAmongTheStacksTaken) {
  SideBandFixture f;
  for (uint32_t user_depth : {1u, 0u}) {  // a user stack walked in the kernel; none
    auto walked = event<bpfprof_frames_event>(BPFPROF_CONTEXT_SWITCH_OUT,
                                              BPFPROF_PAYLOAD_UNWOUND_FRAMES, 500);
    walked->head.user_depth = user_depth;
    walked->ips[0] = 0x401000;
    f.pipeline.take_bpf_event(walked.get(), sizeof(bpfprof_frames_event));
  }
  constexpr size_t kStackBytes = 256;
  const size_t size = offsetof(bpfprof_copy_event, stack) + kStackBytes;
  for (uint8_t context : {BPFPROF_CONTEXT_SAMPLE, BPFPROF_CONTEXT_SWITCH_OUT}) {
    auto e = event<bpfprof_copy_event>(context, BPFPROF_PAYLOAD_COPY, 600);
    e->user_regs[BPFPROF_REG_IP] = 0x401000;
    e->user_regs[BPFPROF_REG_SP] = 0x7ffc0000;
    e->stack_size = 4096;  // more than the event holds: what it holds counts
    f.pipeline.take_bpf_event(e.get(), size);
  }
  const RecordingStats& stats = f.recording.stats;
  EXPECT_EQ(stats.user_stacks_taken, 3u);
  EXPECT_EQ(stats.copied_stacks, 2u);
  EXPECT_EQ(stats.stack_copy_bytes, 2 * kStackBytes);
  EXPECT_EQ(stats.copy_event_bytes, 2 * size);
  EXPECT_EQ(stats.unwind_ns.size(), 2u);
}

}  // namespace
}  // namespace bpfprof
