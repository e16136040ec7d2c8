// A small recorded session made by hand (no BPF, no root, no binaries): one process with a
// main thread and a worker, samples with complete and cut-short stacks, events lost; and a
// symbolizer that names its made-up addresses. For the writer's unit tests and for the
// profile that profiler-cli loads in tests/integration/writer.test.mjs.
#pragma once

#include <string>
#include <vector>

#include "userspace/model/session_model.h"
#include "userspace/output/profile_symbolizer.h"

namespace bpfprof::synthetic {

inline constexpr int kDemoPid = 4242;
inline constexpr int kWorkerTid = 4243;
inline constexpr uint64_t kDemoBase = 0x400000;  // where /opt/demo/demo is mapped

// Offsets in /opt/demo/demo and the functions there.
inline constexpr uint64_t kStartOffset = 0x100;    // _start: a thread root
inline constexpr uint64_t kMainOffset = 0x200;     // main
inline constexpr uint64_t kComputeOffset = 0x300;  // compute_hash
inline constexpr uint64_t kWorkerOffset = 0x400;   // worker_loop (its stack is cut short)

class FakeSymbolizer final : public ProfileSymbolizer {
 public:
  LibraryDescription describe_library(const std::string& path, const std::string&,
                                      const std::string&) override {
    LibraryDescription d;
    d.name = d.debug_name = path.substr(path.rfind('/') + 1);
    d.path = d.debug_path = path;
    d.arch = "x86_64";
    return d;
  }
  LibraryDescription describe_kernel() override {
    LibraryDescription d;
    d.name = d.path = d.debug_name = d.debug_path = "[kernel.kallsyms]";
    return d;
  }
  std::vector<SymbolizedFrame> symbolize_in_file(const std::string&, uint64_t offset) override {
    SymbolizedFrame f;
    f.relative_address = offset;
    const uint64_t function = offset & ~uint64_t{0xff};
    f.name = function == kStartOffset     ? "_start"
             : function == kMainOffset    ? "main"
             : function == kComputeOffset ? "compute_hash"
             : function == kWorkerOffset  ? "worker_loop"
                                          : "";
    if (!f.name.empty()) f.symbol = NativeSymbolInfo{f.name, function, 0x100};
    return {f};
  }
  std::vector<SymbolizedFrame> symbolize_kernel(uint64_t address) override {
    SymbolizedFrame f;
    f.name = "do_syscall_64";
    f.relative_address = address & 0xffffff;
    return {f};
  }
  std::vector<SymbolizedFrame> symbolize_jit(int, uint32_t, uint64_t) override {
    return {SymbolizedFrame{}};
  }
  bool is_thread_root(const std::string&, uint64_t offset) override {
    return (offset & ~uint64_t{0xff}) == kStartOffset;
  }
};

inline MonotonicNs at_ms(uint64_t ms) { return MonotonicNs{ms * 1000000}; }

// The recording: 1000 Hz from 0 to 100 ms. The main thread runs compute_hash under main for
// 4 ticks in a row (one sample of weight 4) and main itself for 2; the worker runs
// worker_loop, whose stack does not reach a thread root, for 2.
inline Recording demo_recording() {
  Recording r;
  r.start_time = at_ms(0);
  r.end_time = at_ms(100);
  r.start_wall_clock_ms = 1.7e12;
  r.frequency_hz = 1000;
  r.sampling_event = "cpu-clock";
  r.call_graph = CallGraph::kDwarf;
  r.stats.samples = 8;
  r.stats.lost_bpf_events = 5;
  r.stats.lost_bpf_events_per_cpu = {0, 5};
  r.stats.lost_sideband_records = 1;
  r.losses.push_back(LossRecord{at_ms(50), Pid{kDemoPid}, 5});
  return r;
}

inline void add_demo_sample(SessionModel& model, RawStackTree& raw, uint64_t ms, int tid,
                            uint64_t cpu_ns, const std::vector<uint64_t>& root_to_leaf) {
  model.add_sample(SampleRecord{at_ms(ms), Pid{kDemoPid}, Tid{tid}, Cpu{0}, CpuTimeNs{cpu_ns},
                                raw.intern_path(root_to_leaf)},
                   raw);
}

// `raw`: the raw stacks of the samples (more samples added later must use the same tree).
// With `page_faults` (record --memory), main's compute brings memory in twice and maps 2 MiB
// (a sampled mmap).
inline void build_demo_model(SessionModel& model, const Recording& recording, RawStackTree& raw,
                             bool page_faults = false) {
  model.configure_for(recording);
  model.apply(at_ms(0), ProcessStartEvent{Pid{kDemoPid}, "demo", false});
  MmapEvent mmap{Pid{kDemoPid}, Tid{kDemoPid}, {}};
  mmap.mapping.start = kDemoBase;
  mmap.mapping.length = 0x1000;
  mmap.mapping.path = "/opt/demo/demo";
  model.apply(at_ms(0), mmap);
  model.apply(at_ms(1),
              ForkEvent{Pid{kDemoPid}, Tid{kDemoPid}, Pid{kDemoPid}, Tid{kWorkerTid}, "worker"});
  // Return addresses are one past the call: the model nudges them back into the call.
  const uint64_t start = kDemoBase + kStartOffset + 0x11;
  const uint64_t main_ret = kDemoBase + kMainOffset + 0x21;
  const uint64_t main_ip = kDemoBase + kMainOffset + 0x40;
  const uint64_t compute = kDemoBase + kComputeOffset + 0x8;
  const uint64_t worker = kDemoBase + kWorkerOffset + 0x4;
  for (uint64_t ms = 10; ms < 14; ++ms)
    add_demo_sample(model, raw, ms, kDemoPid, ms * 1000000, {start, main_ret, compute});
  for (uint64_t ms = 15; ms < 17 && page_faults; ++ms)
    model.add_sample(SampleRecord{at_ms(ms), Pid{kDemoPid}, Tid{kDemoPid}, Cpu{0}, CpuTimeNs{0},
                                  raw.intern_path(std::vector<uint64_t>{start, main_ret, compute}),
                                  SampleKind::kPageFault},
                     raw);
  if (page_faults) {
    SampleRecord mapped{at_ms(17),
                        Pid{kDemoPid},
                        Tid{kDemoPid},
                        Cpu{0},
                        CpuTimeNs{0},
                        raw.intern_path(std::vector<uint64_t>{start, main_ret, compute}),
                        SampleKind::kAddressSpaceCall};
    mapped.address_space_call = {AddressSpaceCallKind::kMmap, 0x7f0000000000, 2 << 20};
    model.add_sample(mapped, raw);
  }
  add_demo_sample(model, raw, 20, kDemoPid, 21000000, {start, main_ip});
  add_demo_sample(model, raw, 30, kDemoPid, 22000000, {start, main_ip});
  add_demo_sample(model, raw, 40, kWorkerTid, 1000000, {worker});
  add_demo_sample(model, raw, 60, kWorkerTid, 2000000, {worker});
  model.finish(recording.end_time);
}

// The demo session, its model built: what the writers' tests write.
struct DemoSession {
  Recording recording = demo_recording();
  SessionModel model;
  RawStackTree raw;
  FakeSymbolizer symbolizer;
  explicit DemoSession(bool memory = false) {
    recording.record_memory = memory;
    build_demo_model(model, recording, raw, memory);
  }
};

}  // namespace bpfprof::synthetic
