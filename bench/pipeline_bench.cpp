// Throughput of the userspace path after collection: replaying a recording into the session
// model (stack resolution) and writing the profile (symbolization, JSON, gzip).
// The recording is synthetic but its addresses are real: they point into this benchmark's
// own executable and libc, so symbolization does real ELF work.
#include <benchmark/benchmark.h>

#include <dlfcn.h>
#include <link.h>

#include <cstdlib>
#include <random>

#include "symbols/util/proc_maps.h"
#include "userspace/model/session_model.h"
#include "userspace/output/output_file.h"
#include "userspace/output/profile_writer.h"

namespace bpfprof {
namespace {

class CountingSink final : public OutputSink {
 public:
  void write(std::string_view data) override { bytes += data.size(); }
  size_t bytes = 0;
};

// A recording of `samples` samples over `unique_stacks` distinct 20-frame stacks in 4 threads.
Recording make_recording(size_t samples, size_t unique_stacks) {
  Recording rec;
  rec.frequency_hz = 1000;
  rec.sampling_event = "cpu-clock";
  const Pid pid{static_cast<int32_t>(getpid())};
  rec.events.push_back(LifecycleEvent{MonotonicNs{0}, ProcessStartEvent{pid, "bench", false}});
  std::vector<uint64_t> code_addresses;
  auto maps = read_proc_maps(getpid());
  for (const MapEntry& m : maps.value_or(std::vector<MapEntry>{})) {
    if (!m.executable || m.path.empty() || m.path[0] != '/') continue;
    MmapEvent e;
    e.pid = pid;
    e.tid = Tid{pid.value};
    e.mapping = MappingInfo{m.start,     m.end - m.start, m.file_offset, m.dev_major,
                            m.dev_minor, m.inode,         m.path,        {}};
    rec.events.push_back(LifecycleEvent{MonotonicNs{0}, std::move(e)});
    for (uint64_t a = m.start + 64; a < m.end; a += 4096 + 37) code_addresses.push_back(a);
  }
  std::mt19937_64 rng(42);
  std::vector<RawStackId> stacks;
  for (size_t s = 0; s < unique_stacks; ++s) {
    std::vector<uint64_t> path;
    for (int depth = 0; depth < 20; ++depth)
      path.push_back(depth < 10 ? code_addresses[depth % code_addresses.size()]
                                : code_addresses[rng() % code_addresses.size()]);
    stacks.push_back(rec.raw_stacks.intern_path(path));
  }
  for (size_t i = 0; i < samples; ++i) {
    Tid tid{pid.value + static_cast<int32_t>(i % 4)};
    rec.samples.push_back(SampleRecord{MonotonicNs{1000000 + i * 250000}, pid, tid, Cpu{0},
                                       CpuTimeNs{i * 250000}, stacks[rng() % stacks.size()]});
  }
  rec.start_time = MonotonicNs{0};
  rec.end_time = MonotonicNs{1000000 + samples * 250000};
  return rec;
}

void BM_ReplayAndWrite(benchmark::State& state) {
  const size_t samples = static_cast<size_t>(state.range(0));
  const size_t unique = static_cast<size_t>(state.range(1));
  Recording rec = make_recording(samples, unique);
  size_t bytes = 0;
  for (auto _ : state) {
    SessionModel model;
    model.replay(rec);
    CountingSink sink;
    write_profile(model, rec, sink);
    bytes = sink.bytes;
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * samples));
  state.counters["json_bytes_per_sample"] =
      static_cast<double>(bytes) / static_cast<double>(samples);
}
BENCHMARK(BM_ReplayAndWrite)
    ->Args({100000, 1000})
    ->Args({100000, 20000})
    ->Unit(benchmark::kMillisecond);

void BM_ReplayAndWriteGzip(benchmark::State& state) {
  const size_t samples = static_cast<size_t>(state.range(0));
  Recording rec = make_recording(samples, 1000);
  std::string path =
      std::string(getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp") + "/bpfprof-bench.json.gz";
  for (auto _ : state) {
    SessionModel model;
    model.replay(rec);
    auto sink = open_output(path);
    write_profile(model, rec, *sink);
    sink->commit();
  }
  std::remove(path.c_str());
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * samples));
}
BENCHMARK(BM_ReplayAndWriteGzip)->Arg(100000)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace bpfprof

BENCHMARK_MAIN();
