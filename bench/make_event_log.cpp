// Writes a synthetic event log (the format of `bpfprof record --save-events`) of N timer
// samples with frame-pointer stacks, for `bpfprof replay` to measure throughput and memory
// at sizes a live recording on this 2-CPU machine would take hours to reach.
// Stacks are real code addresses of this program and libc (so symbolization does real ELF
// and DWARF work), 20 user frames plus 4 kernel frames, drawn from UNIQUE distinct stacks;
// 4 threads of one process, a sample every 250 us.
//
// Usage: make_event_log SAMPLES UNIQUE_STACKS OUT
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>

#include "bpf/events.h"
#include "symbols/util/proc_maps.h"
#include "userspace/capture/event_log.h"

using namespace bpfprof;

int main(int argc, char** argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: %s SAMPLES UNIQUE_STACKS OUT\n", argv[0]);
    return 2;
  }
  const uint64_t samples = strtoull(argv[1], nullptr, 0);
  const uint64_t unique = std::max<uint64_t>(1, strtoull(argv[2], nullptr, 0));
  const Pid pid{static_cast<int32_t>(getpid())};
  const MonotonicNs start{1000000000};

  EventLogWriter log(argv[3], RecordingSettings{4000, "cpu-clock", false, CallGraph::kFramePointers,
                                                start, 1.7e12});
  std::vector<LifecycleEvent> events;
  ExistingProcessEvent process{pid, "synthetic", "/proc/self/exe", {}};
  for (int i = 0; i < 4; ++i)
    process.threads.push_back(
        ThreadState{Tid{pid.value + i}, "worker-" + std::to_string(i), CpuTimeNs{0}});
  events.push_back(LifecycleEvent{start, process});
  std::vector<uint64_t> code;
  for (const MapEntry& m : read_proc_maps(getpid()).value_or(std::vector<MapEntry>{})) {
    if (!m.executable || m.path.empty() || m.path[0] != '/') continue;
    events.push_back(LifecycleEvent{start, MmapEvent{pid, Tid{pid.value},
                                                     MappingInfo{m.start,
                                                                 m.end - m.start,
                                                                 m.file_offset,
                                                                 m.dev_major,
                                                                 m.dev_minor,
                                                                 m.inode,
                                                                 m.path,
                                                                 {}}}});
    for (uint64_t a = m.start + 64; a < m.end; a += 4096 + 37) code.push_back(a);
  }
  log.write_lifecycle_events(events, 0);

  std::mt19937_64 rng(42);
  constexpr uint32_t kUserDepth = 20;
  constexpr uint32_t kKernelDepth = 4;
  std::vector<std::vector<uint64_t>> stacks(unique);
  for (auto& ips : stacks) {
    for (uint32_t depth = 0; depth < kUserDepth; ++depth)  // innermost first
      ips.push_back(depth >= 10 ? code[depth % code.size()] : code[rng() % code.size()]);
    for (uint32_t depth = 0; depth < kKernelDepth; ++depth)
      ips.push_back(0xffffffff81000000ull + (rng() % 0x800000));
  }
  bpfprof_frames_event event{};
  event.head.context = BPFPROF_CONTEXT_SAMPLE;
  event.head.payload = BPFPROF_PAYLOAD_FP_FRAMES;
  uint64_t cpu_time[4] = {};
  for (uint64_t i = 0; i < samples; ++i) {
    const uint32_t thread = static_cast<uint32_t>(i % 4);
    const std::vector<uint64_t>& ips = stacks[rng() % unique];
    event.head.header.kind = BPFPROF_EVENT_STACK;
    event.head.header.cpu = thread % 2;
    event.head.header.timestamp_ns = start.value + 1000000 + i * 250000;
    event.head.header.pid = static_cast<uint32_t>(pid.value);
    event.head.header.tid = static_cast<uint32_t>(pid.value) + thread;
    cpu_time[thread] += 1000000;
    event.head.cpu_time_ns = cpu_time[thread];
    event.head.user_depth = kUserDepth;
    event.head.kernel_depth = kKernelDepth;
    std::copy(ips.begin(), ips.end(), event.ips);
    log.write_bpf_event(&event,
                        offsetof(bpfprof_frames_event, ips) + ips.size() * sizeof(uint64_t));
  }
  log.finish(RecordingTrailer{MonotonicNs{start.value + 2000000 + samples * 250000}, 0, 0});
  fprintf(stderr, "make_event_log: %llu samples over %llu stacks, %.1f MB\n",
          static_cast<unsigned long long>(samples), static_cast<unsigned long long>(unique),
          static_cast<double>(log.bytes_written()) / 1e6);
  return 0;
}
