// perf_event_open plumbing: the per-CPU sampling events that drive the BPF sample program,
// and the per-CPU side-band events whose ring buffers carry MMAP2 and COMM records.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "userspace/recording.h"
#include "userspace/unique_fd.h"

namespace bpfprof {

std::vector<int> online_cpus();

// One sampling event per online CPU, system-wide, in frequency mode. Hardware cycles when
// the machine has a PMU, else the cpu-clock software timer.
struct SamplingEvents {
  std::string event_name;  // "cycles" or "cpu-clock"
  std::vector<UniqueFd> fds;
};
// Throws std::runtime_error with a one-line message when no event can be opened.
SamplingEvents open_sampling_events(uint32_t frequency_hz, const std::vector<int>& cpus);

// Receives MMAP2 (executable mappings, with build-ids) and COMM records of all processes,
// timestamped with CLOCK_MONOTONIC like the BPF events.
class SideBandReader {
 public:
  explicit SideBandReader(const std::vector<int>& cpus);
  ~SideBandReader();
  SideBandReader(const SideBandReader&) = delete;
  SideBandReader& operator=(const SideBandReader&) = delete;

  // Appends the records available now to `out`; returns the number read.
  size_t drain(std::vector<LifecycleEvent>& out);
  uint64_t lost_records() const { return lost_; }
  const std::vector<int>& fds_for_poll() const { return poll_fds_; }

 private:
  struct Ring {
    UniqueFd fd;
    void* base = nullptr;
    size_t size = 0;  // metadata page + data pages
  };
  void decode(const uint8_t* record, size_t size, std::vector<LifecycleEvent>& out);

  std::vector<Ring> rings_;
  std::vector<int> poll_fds_;
  std::vector<uint8_t> scratch_;
  uint64_t lost_ = 0;
};

}  // namespace bpfprof
