// perf_event_open plumbing: the per-CPU sampling events that drive the BPF sample program,
// and the per-CPU side-band events whose ring buffers carry MMAP2 and COMM records.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "symbols/util/unique_handle.h"
#include "userspace/model/recording.h"

namespace bpfprof {

std::vector<int> online_cpus();
// "0-3,5,7-8" as in /sys/devices/system/cpu/online; nullopt when malformed.
std::optional<std::vector<int>> parse_cpu_list(std::string_view text);

// One sampling event per online CPU, system-wide, in frequency mode. Hardware cycles when
// the machine has a PMU, else the cpu-clock software timer.
struct SamplingEvents {
  std::string event_name;  // "cycles" or "cpu-clock"
  std::vector<UniqueFd> fds;
  // record --memory: per CPU, the page faults of user code, every BPFPROF_PAGE_FAULT_PERIOD.
  std::vector<UniqueFd> page_fault_fds;
};
// Throws std::runtime_error with a one-line message when no event can be opened.
SamplingEvents open_sampling_events(uint32_t frequency_hz, const std::vector<int>& cpus);
// The page-fault events of `cpus` into `events` (throws as above).
void open_page_fault_events(const std::vector<int>& cpus, SamplingEvents& events);

// Reads the records between `tail` and `head` of a perf ring's data area (`data_size`
// bytes, a power of two; positions grow without wrapping), each copied whole into `scratch`
// and passed to `on_record`. A record whose size is impossible (smaller than its header, or
// reaching past head) means the rest cannot be trusted: it is skipped, and `corrupt` set.
struct PerfRingRead {
  size_t records = 0;
  bool corrupt = false;
};
PerfRingRead read_perf_ring(const uint8_t* data, uint64_t data_size, uint64_t tail, uint64_t head,
                            std::vector<uint8_t>& scratch,
                            const std::function<void(const uint8_t*, size_t)>& on_record);

// One side-band record (a perf_event_header and its body, with sample_id_all's {pid, tid,
// time} trailer): an MMAP2 becomes an MmapEvent, an exec's COMM an AddressSpaceResetEvent,
// appended to `out`; a LOST record returns its count. Short or unknown records are skipped.
uint64_t decode_side_band_record(const uint8_t* record, size_t size,
                                 std::vector<LifecycleEvent>& out);

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
  // Records the kernel dropped (ring full), plus one for each stretch of a ring that was
  // skipped as corrupt.
  uint64_t lost_records() const { return lost_; }

 private:
  struct Ring {
    UniqueFd fd;
    void* base = nullptr;
    size_t size = 0;  // metadata page + data pages
  };

  std::vector<Ring> rings_;
  std::vector<uint8_t> scratch_;
  uint64_t lost_ = 0;
};

}  // namespace bpfprof
