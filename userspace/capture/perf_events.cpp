#include "userspace/capture/perf_events.h"

#include <linux/perf_event.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <optional>
#include <stdexcept>
#include <string_view>

#include "bpf/events.h"

namespace bpfprof {

namespace {

int perf_event_open(perf_event_attr* attr, pid_t pid, int cpu, int group_fd, unsigned long flags) {
  return static_cast<int>(syscall(SYS_perf_event_open, attr, pid, cpu, group_fd, flags));
}

}  // namespace

std::optional<std::vector<int>> parse_cpu_list(std::string_view text) {
  std::vector<int> cpus;
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.remove_suffix(1);
  while (!text.empty()) {
    const size_t comma = text.find(',');
    const std::string_view part = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view{} : text.substr(comma + 1);
    const char* const part_end = part.data() + part.size();
    int first = 0, last = 0;
    std::from_chars_result read = std::from_chars(part.data(), part_end, first);
    last = first;
    if (read.ec == std::errc{} && read.ptr != part_end && *read.ptr == '-')
      read = std::from_chars(read.ptr + 1, part_end, last);
    if (read.ec != std::errc{} || read.ptr != part_end || first < 0 || last < first || last > 65535)
      return std::nullopt;
    for (int c = first; c <= last; ++c) cpus.push_back(c);
  }
  return cpus;
}

std::vector<int> online_cpus() {
  std::ifstream in("/sys/devices/system/cpu/online");
  std::string text;
  std::getline(in, text);
  // Malformed (never seen): every CPU the system counts, rather than some of them.
  std::vector<int> cpus = parse_cpu_list(text).value_or(std::vector<int>{});
  if (cpus.empty()) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    for (int c = 0; c < n; ++c) cpus.push_back(c);
  }
  return cpus;
}

SamplingEvents open_sampling_events(uint32_t frequency_hz, const std::vector<int>& cpus) {
  struct Candidate {
    const char* name;
    uint32_t type;
    uint64_t config;
  };
  const Candidate candidates[] = {
      {"cycles", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES},
      {"cpu-clock", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_CLOCK},
  };
  std::string last_error;
  for (const Candidate& c : candidates) {
    SamplingEvents events;
    events.event_name = c.name;
    bool ok = true;
    for (int cpu : cpus) {
      perf_event_attr attr{};
      attr.size = sizeof(attr);
      attr.type = c.type;
      attr.config = c.config;
      attr.freq = 1;
      attr.sample_freq = frequency_hz;
      attr.sample_type = PERF_SAMPLE_TID | PERF_SAMPLE_TIME;
      int fd = perf_event_open(&attr, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC);
      if (fd < 0) {
        last_error =
            std::string(c.name) + " on CPU " + std::to_string(cpu) + ": " + strerror(errno);
        ok = false;
        break;
      }
      events.fds.emplace_back(fd);
    }
    if (ok) return events;
  }
  throw std::runtime_error("cannot open a sampling event (" + last_error + ")");
}

void open_page_fault_events(const std::vector<int>& cpus, SamplingEvents& events) {
  for (int cpu : cpus) {
    perf_event_attr attr{};
    attr.size = sizeof(attr);
    attr.type = PERF_TYPE_SOFTWARE;
    attr.config = PERF_COUNT_SW_PAGE_FAULTS;
    attr.sample_period = BPFPROF_PAGE_FAULT_PERIOD;
    attr.sample_type = PERF_SAMPLE_TID | PERF_SAMPLE_TIME;
    // User code's faults: the kernel's own (copying to a user buffer, a BPF program's reads)
    // would run the program within others of ours.
    attr.exclude_kernel = 1;
    attr.exclude_hv = 1;
    int fd = perf_event_open(&attr, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC);
    if (fd < 0)
      throw std::runtime_error("cannot open the page-fault event on CPU " + std::to_string(cpu) +
                               ": " + strerror(errno));
    events.page_fault_fds.emplace_back(fd);
  }
}

SideBandReader::SideBandReader(const std::vector<int>& cpus) {
  constexpr size_t kDataPages = 64;  // 256 KiB per CPU: mappings arrive in bursts at exec
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  for (int cpu : cpus) {
    perf_event_attr attr{};
    attr.size = sizeof(attr);
    attr.type = PERF_TYPE_SOFTWARE;
    attr.config = PERF_COUNT_SW_DUMMY;
    attr.sample_type = PERF_SAMPLE_TID | PERF_SAMPLE_TIME;
    attr.sample_id_all = 1;
    attr.mmap = 1;
    attr.mmap2 = 1;
    attr.build_id = 1;
    attr.comm = 1;
    attr.comm_exec = 1;
    attr.use_clockid = 1;
    attr.clockid = CLOCK_MONOTONIC;
    attr.watermark = 1;
    attr.wakeup_watermark = 1;
    int fd = perf_event_open(&attr, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC);
    if (fd < 0)
      throw std::runtime_error("cannot open the mapping side-band event on CPU " +
                               std::to_string(cpu) + ": " + strerror(errno));
    Ring ring;
    ring.fd = UniqueFd(fd);
    ring.size = (kDataPages + 1) * page;
    ring.base = mmap(nullptr, ring.size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (ring.base == MAP_FAILED)
      throw std::runtime_error(std::string("cannot map the side-band ring buffer: ") +
                               strerror(errno));
    rings_.push_back(std::move(ring));
  }
}

PerfRingRead read_perf_ring(const uint8_t* data, uint64_t data_size, uint64_t tail, uint64_t head,
                            std::vector<uint8_t>& scratch,
                            const std::function<void(const uint8_t*, size_t)>& on_record) {
  PerfRingRead read;
  while (tail < head) {
    perf_event_header header;
    for (size_t i = 0; i < sizeof(header); ++i)
      reinterpret_cast<uint8_t*>(&header)[i] = data[(tail + i) % data_size];
    if (header.size < sizeof(header) || header.size > head - tail) {
      read.corrupt = true;
      break;
    }
    scratch.resize(header.size);
    for (size_t i = 0; i < header.size; ++i) scratch[i] = data[(tail + i) % data_size];
    on_record(scratch.data(), header.size);
    tail += header.size;
    ++read.records;
  }
  return read;
}

SideBandReader::~SideBandReader() {
  for (Ring& r : rings_)
    if (r.base && r.base != MAP_FAILED) munmap(r.base, r.size);
}

size_t SideBandReader::drain(std::vector<LifecycleEvent>& out) {
  size_t count = 0;
  const size_t first_new = out.size();
  for (Ring& ring : rings_) {
    auto* meta = static_cast<perf_event_mmap_page*>(ring.base);
    const uint8_t* data = static_cast<const uint8_t*>(ring.base) + meta->data_offset;
    const uint64_t head = __atomic_load_n(&meta->data_head, __ATOMIC_ACQUIRE);
    const PerfRingRead read = read_perf_ring(data, meta->data_size, meta->data_tail, head, scratch_,
                                             [&](const uint8_t* record, size_t size) {
                                               lost_ += decode_side_band_record(record, size, out);
                                             });
    count += read.records;
    if (read.corrupt) ++lost_;
    __atomic_store_n(&meta->data_tail, head, __ATOMIC_RELEASE);
  }
  // One ring per CPU: a process that moved between CPUs has its exec (address-space reset)
  // and its first mmaps in different rings. In time order, the unwinder never applies a
  // reset after the mappings that followed it.
  std::stable_sort(
      out.begin() + static_cast<std::ptrdiff_t>(first_new), out.end(),
      [](const LifecycleEvent& a, const LifecycleEvent& b) { return a.time < b.time; });
  return count;
}

namespace {

// sample_id_all appends {pid, tid, time} to every record (PERF_SAMPLE_TID | PERF_SAMPLE_TIME).
constexpr size_t kSampleIdTrailer = 16;

MonotonicNs record_time(const uint8_t* record, size_t size) {
  uint64_t t;
  memcpy(&t, record + size - 8, 8);
  return MonotonicNs{t};
}

// The body of PERF_RECORD_MMAP2 up to the file name.
struct Mmap2Body {
  uint32_t pid, tid;
  uint64_t addr, len, pgoff;
  union {
    struct {
      uint32_t maj, min;
      uint64_t ino, ino_generation;
    } file;
    struct {
      uint8_t build_id_size, reserved1;
      uint16_t reserved2;
      uint8_t build_id[20];
    } id;
  };
  uint32_t prot, flags;
};

void decode_mmap2(const perf_event_header& header, const uint8_t* record, size_t size,
                  std::vector<LifecycleEvent>& out) {
  Mmap2Body body;
  if (size < sizeof(header) + sizeof(body) + kSampleIdTrailer) return;
  memcpy(&body, record + sizeof(header), sizeof(body));
  const char* name = reinterpret_cast<const char*>(record + sizeof(header) + sizeof(body));
  const size_t max_name = size - sizeof(header) - sizeof(body) - kSampleIdTrailer;
  MmapEvent e;
  e.pid = Pid{static_cast<int32_t>(body.pid)};
  e.tid = Tid{static_cast<int32_t>(body.tid)};
  e.mapping.start = body.addr;
  e.mapping.length = body.len;
  e.mapping.file_offset = body.pgoff;
  e.mapping.path.assign(name, strnlen(name, max_name));
  if (header.misc & PERF_RECORD_MISC_MMAP_BUILD_ID) {
    const size_t n = std::min<size_t>(body.id.build_id_size, sizeof(body.id.build_id));
    e.mapping.build_id.assign(reinterpret_cast<const char*>(body.id.build_id), n);
  } else {
    e.mapping.dev_major = body.file.maj;
    e.mapping.dev_minor = body.file.min;
    e.mapping.inode = body.file.ino;
  }
  out.push_back(LifecycleEvent{record_time(record, size), std::move(e)});
}

// Only exec matters here (a new address space); renames come from BPF.
void decode_comm(const perf_event_header& header, const uint8_t* record, size_t size,
                 std::vector<LifecycleEvent>& out) {
  if (!(header.misc & PERF_RECORD_MISC_COMM_EXEC)) return;
  if (size < sizeof(header) + 8 + kSampleIdTrailer) return;
  uint32_t ids[2];
  memcpy(ids, record + sizeof(header), 8);
  out.push_back(LifecycleEvent{record_time(record, size),
                               AddressSpaceResetEvent{Pid{static_cast<int32_t>(ids[0])},
                                                      Tid{static_cast<int32_t>(ids[1])}}});
}

}  // namespace

uint64_t decode_side_band_record(const uint8_t* record, size_t size,
                                 std::vector<LifecycleEvent>& out) {
  perf_event_header header;
  if (size < sizeof(header)) return 0;
  memcpy(&header, record, sizeof(header));
  switch (header.type) {
    case PERF_RECORD_MMAP2:
      decode_mmap2(header, record, size, out);
      return 0;
    case PERF_RECORD_COMM:
      decode_comm(header, record, size, out);
      return 0;
    case PERF_RECORD_LOST: {
      uint64_t body[2];  // id, lost
      if (size < sizeof(header) + sizeof(body)) return 0;
      memcpy(body, record + sizeof(header), sizeof(body));
      return body[1];
    }
    default:
      return 0;
  }
}

}  // namespace bpfprof
