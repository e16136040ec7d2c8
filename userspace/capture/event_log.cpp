#include "userspace/capture/event_log.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <xxhash.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "symbols/util/unique_handle.h"
#include "symbols/util/untrusted_file.h"

namespace bpfprof {

namespace {

// The magic line ends in the format's version. The BPF events are stored as the ring buffer
// gave them (bpf/events.h), so a log of another version holds events this decoder would
// misread: it is refused. Records carry a checksum, so that a damaged stream is refused
// rather than replayed into a wrong profile.
constexpr char kMagicPrefix[] = "bpfprof event log ";
constexpr char kVersion[] = "6";
constexpr char kMagic[] = "bpfprof event log 6\n";
constexpr size_t kMagicSize = sizeof(kMagic) - 1;
constexpr size_t kMagicPrefixSize = sizeof(kMagicPrefix) - 1;

enum RecordType : uint8_t { kSettings = 1, kBpfEvent = 2, kLifecycle = 3, kTrailer = 4 };

// A record: type (1 byte), payload length (4), checksum of type and payload (4), payload.
constexpr size_t kRecordHeaderSize = 1 + 4 + 4;

// XXH3 (seeded with the type), low 32 bits: a replay reads hundreds of MB of records, and
// zlib's CRC-32 doubled the time to read and decode them.
uint32_t record_checksum(uint8_t type, const uint8_t* payload, uint32_t length) {
  return static_cast<uint32_t>(XXH3_64bits_withSeed(payload, length, type));
}

class ByteWriter {
 public:
  explicit ByteWriter(std::vector<uint8_t>& out) : out_(out) { out_.clear(); }
  template <typename T>
  void put(T value) {
    static_assert(std::is_trivially_copyable_v<T>);
    // resize + memcpy rather than insert: GCC 12 warns falsely (stringop-overflow) on the latter.
    const size_t at = out_.size();
    out_.resize(at + sizeof(T));
    std::memcpy(out_.data() + at, &value, sizeof(T));
  }
  void put(const std::string& s) {
    put<uint32_t>(static_cast<uint32_t>(s.size()));
    out_.insert(out_.end(), s.begin(), s.end());
  }

 private:
  std::vector<uint8_t>& out_;
};

class ByteReader {
 public:
  ByteReader(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  template <typename T>
  T get() {
    static_assert(std::is_trivially_copyable_v<T>);
    need(sizeof(T));
    T value;
    memcpy(&value, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return value;
  }
  std::string get_string() {
    uint32_t n = get<uint32_t>();
    need(n);
    std::string s(reinterpret_cast<const char*>(data_ + pos_), n);
    pos_ += n;
    return s;
  }

 private:
  void need(size_t n) const {
    if (size_ - pos_ < n) throw std::runtime_error("corrupt event log: a record ends early");
  }
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

void put_mapping(ByteWriter& w, const MappingInfo& m) {
  w.put(m.start), w.put(m.length), w.put(m.file_offset), w.put(m.dev_major), w.put(m.dev_minor),
      w.put(m.inode);
  w.put(m.path), w.put(m.build_id);
}

MappingInfo get_mapping(ByteReader& r) {
  MappingInfo m;
  m.start = r.get<uint64_t>(), m.length = r.get<uint64_t>(), m.file_offset = r.get<uint64_t>();
  m.dev_major = r.get<uint32_t>(), m.dev_minor = r.get<uint32_t>(), m.inode = r.get<uint64_t>();
  m.path = r.get_string(), m.build_id = r.get_string();
  return m;
}

// One overload per payload type, each writing its fields in declaration order.
void put_payload(ByteWriter& w, const ForkEvent& e) {
  w.put(e.parent_pid), w.put(e.parent_tid), w.put(e.child_pid), w.put(e.child_tid),
      w.put(e.child_comm);
}
void put_payload(ByteWriter& w, const ExecEvent& e) {
  w.put(e.pid), w.put(e.tid), w.put(e.old_tid), w.put(e.comm), w.put(e.filename);
}
void put_payload(ByteWriter& w, const ExitEvent& e) {
  w.put(e.pid), w.put(e.tid), w.put(e.cpu_time), w.put(e.exit_code), w.put<uint8_t>(e.group_dead),
      w.put(e.comm);
}
void put_payload(ByteWriter& w, const CommEvent& e) { w.put(e.pid), w.put(e.tid), w.put(e.comm); }
void put_payload(ByteWriter& w, const MmapEvent& e) {
  w.put(e.pid), w.put(e.tid), put_mapping(w, e.mapping);
}
void put_payload(ByteWriter& w, const AddressSpaceResetEvent& e) { w.put(e.pid), w.put(e.tid); }
void put_payload(ByteWriter& w, const ProcessStartEvent& e) {
  w.put(e.pid), w.put(e.name), w.put<uint8_t>(e.is_launcher);
}
void put_payload(ByteWriter& w, const ExistingProcessEvent& e) {
  w.put(e.pid), w.put(e.name), w.put(e.executable),
      w.put<uint32_t>(static_cast<uint32_t>(e.threads.size()));
  for (const ThreadState& t : e.threads) w.put(t.tid), w.put(t.comm), w.put(t.cpu_time);
}

void put_payload(ByteWriter& w, const ProcessContextEvent& e) {
  const ProcessContext& c = e.context;
  w.put(e.pid), w.put<uint8_t>(c.runtime ? static_cast<uint8_t>(*c.runtime) + 1 : 0),
      w.put(c.container_id), w.put(c.pod_uid);
  w.put<uint8_t>(c.qos ? static_cast<uint8_t>(*c.qos) + 1 : 0), w.put(c.service), w.put(c.cgroup);
  w.put<int32_t>(c.namespace_pid.value_or(0));
}

ProcessContextEvent get_context_event(ByteReader& r) {
  ProcessContextEvent e;
  ProcessContext& c = e.context;
  e.pid = r.get<Pid>();
  if (const auto runtime = r.get<uint8_t>(); runtime != 0) {
    if (runtime > static_cast<uint8_t>(ContainerRuntime::kCri) + 1)
      throw std::runtime_error("corrupt event log: unknown container runtime");
    c.runtime = static_cast<ContainerRuntime>(runtime - 1);
  }
  c.container_id = r.get_string(), c.pod_uid = r.get_string();
  if (const auto qos = r.get<uint8_t>(); qos != 0) {
    if (qos > static_cast<uint8_t>(PodQos::kBestEffort) + 1)
      throw std::runtime_error("corrupt event log: unknown pod QoS class");
    c.qos = static_cast<PodQos>(qos - 1);
  }
  c.service = r.get_string(), c.cgroup = r.get_string();
  if (const auto pid = r.get<int32_t>(); pid > 0) c.namespace_pid = pid;
  return e;
}

LifecyclePayload get_payload(ByteReader& r, size_t index) {
  switch (index) {
    case 0: {
      ForkEvent e;
      e.parent_pid = r.get<Pid>(), e.parent_tid = r.get<Tid>(), e.child_pid = r.get<Pid>(),
      e.child_tid = r.get<Tid>();
      e.child_comm = r.get_string();
      return e;
    }
    case 1: {
      ExecEvent e;
      e.pid = r.get<Pid>(), e.tid = r.get<Tid>(), e.old_tid = r.get<Tid>(), e.comm = r.get_string();
      e.filename = r.get_string();
      return e;
    }
    case 2: {
      ExitEvent e;
      e.pid = r.get<Pid>(), e.tid = r.get<Tid>(), e.cpu_time = r.get<CpuTimeNs>(),
      e.exit_code = r.get<int>();
      e.group_dead = r.get<uint8_t>() != 0, e.comm = r.get_string();
      return e;
    }
    case 3: {
      CommEvent e;
      e.pid = r.get<Pid>(), e.tid = r.get<Tid>(), e.comm = r.get_string();
      return e;
    }
    case 4: {
      MmapEvent e;
      e.pid = r.get<Pid>(), e.tid = r.get<Tid>(), e.mapping = get_mapping(r);
      return e;
    }
    case 5: {
      AddressSpaceResetEvent e;
      e.pid = r.get<Pid>(), e.tid = r.get<Tid>();
      return e;
    }
    case 6: {
      ProcessStartEvent e;
      e.pid = r.get<Pid>(), e.name = r.get_string(), e.is_launcher = r.get<uint8_t>() != 0;
      return e;
    }
    case 7: {
      ExistingProcessEvent e;
      e.pid = r.get<Pid>(), e.name = r.get_string(), e.executable = r.get_string();
      uint32_t threads = r.get<uint32_t>();
      for (uint32_t i = 0; i < threads; ++i) {
        ThreadState t;
        t.tid = r.get<Tid>(), t.comm = r.get_string(), t.cpu_time = r.get<CpuTimeNs>();
        e.threads.push_back(std::move(t));
      }
      return e;
    }
    case 8:
      return get_context_event(r);
    default:
      throw std::runtime_error("corrupt event log: unknown lifecycle event type " +
                               std::to_string(index));
  }
}

static_assert(std::variant_size_v<LifecyclePayload> == 9,
              "add the new event type to the event log");

// The version a log of another format says it is (its magic line's digits, bounded), or
// nullopt if it is not an event log at all.
std::optional<std::string> other_log_version(const uint8_t* data, size_t size) {
  if (size < kMagicPrefixSize || memcmp(data, kMagicPrefix, kMagicPrefixSize) != 0)
    return std::nullopt;
  std::string version;
  for (size_t i = kMagicPrefixSize; i < size && i < kMagicPrefixSize + 8 && isdigit(data[i]); ++i)
    version += static_cast<char>(data[i]);
  return version.empty() ? std::nullopt : std::optional<std::string>(version);
}

}  // namespace

std::vector<uint8_t> encode_lifecycle_event(const LifecycleEvent& event) {
  std::vector<uint8_t> out;
  ByteWriter w(out);
  w.put(event.time);
  w.put<uint8_t>(static_cast<uint8_t>(event.payload.index()));
  std::visit([&](const auto& payload) { put_payload(w, payload); }, event.payload);
  return out;
}

LifecycleEvent decode_lifecycle_event(const uint8_t* data, size_t size) {
  ByteReader r(data, size);
  MonotonicNs time = r.get<MonotonicNs>();
  size_t index = r.get<uint8_t>();
  return LifecycleEvent{time, get_payload(r, index)};
}

EventLogWriter::EventLogWriter(const std::string& path, const RecordingSettings& settings)
    : path_(path) {
  // Raw user stacks can hold keys and passwords: readable by the owner only. In /tmp, a
  // link another user put at the path is not written through (to a file of root's).
  const int no_follow = in_world_writable_directory(path) ? O_NOFOLLOW : 0;
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | no_follow, 0600);
  if (fd >= 0) file_.reset(fdopen(fd, "wb"));
  if (!file_) {
    const int error = errno;
    if (fd >= 0) close(fd);
    throw std::runtime_error("cannot create the event log " + path + ": " + strerror(error));
  }
  setvbuf(file_.get(), nullptr, _IOFBF, 1 << 20);
  if (fwrite(kMagic, 1, kMagicSize, file_.get()) != kMagicSize) note_failure();
  ByteWriter w(scratch_);
  w.put(settings.frequency_hz), w.put(settings.sampling_event), w.put<uint8_t>(settings.off_cpu);
  w.put(std::string(call_graph_name(settings.call_graph))), w.put(settings.start_time),
      w.put(settings.start_wall_clock_ms);
  std::vector<uint8_t> record = std::move(scratch_);
  write_record(kSettings, record.data(), record.size());
}

void EventLogWriter::write_record(uint8_t type, const void* data, size_t size) {
  const uint32_t length = static_cast<uint32_t>(size);
  const uint32_t checksum = record_checksum(type, static_cast<const uint8_t*>(data), length);
  FILE* f = file_.get();
  if (fwrite(&type, 1, 1, f) != 1 || fwrite(&length, sizeof(length), 1, f) != 1 ||
      fwrite(&checksum, sizeof(checksum), 1, f) != 1 || (size && fwrite(data, 1, size, f) != size))
    note_failure();
  bytes_ += kRecordHeaderSize + size;
}

void EventLogWriter::write_bpf_event(const void* data, size_t size) {
  write_record(kBpfEvent, data, size);
}

void EventLogWriter::write_lifecycle_events(const std::vector<LifecycleEvent>& events,
                                            size_t from) {
  for (size_t i = from; i < events.size(); ++i) write_lifecycle_event(events[i]);
}

void EventLogWriter::write_lifecycle_event(const LifecycleEvent& event) {
  std::vector<uint8_t> record = encode_lifecycle_event(event);
  write_record(kLifecycle, record.data(), record.size());
}

void EventLogWriter::finish(const RecordingTrailer& trailer) {
  ByteWriter w(scratch_);
  w.put(trailer.end_time), w.put(trailer.lost_bpf_events), w.put(trailer.lost_sideband_records);
  std::vector<uint8_t> record = std::move(scratch_);
  write_record(kTrailer, record.data(), record.size());
  if (fflush(file_.get()) != 0) note_failure();
  if (failed_errno_)
    throw std::runtime_error("cannot write the event log " + path_ + ": " +
                             strerror(failed_errno_));
}

void EventLogWriter::note_failure() {
  if (!failed_errno_)
    failed_errno_ = errno ? errno : EIO;  // the first failure's reason, not a later errno
}

void EventLogReader::Unmapper::operator()(void* p) const {
  if (p) munmap(p, size);
}

// Mapped rather than read: records are used in place, as a live recording uses the ring
// buffer's, so a replay measures the pipeline and not copying.
EventLogReader::EventLogReader(const std::string& path) : path_(path) {
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  struct stat st {};
  if (!fd.valid() || fstat(fd.get(), &st) != 0)
    throw std::runtime_error("cannot open " + path + ": " + strerror(errno));
  size_ = static_cast<size_t>(st.st_size);
  if (size_ >= kMagicSize) {
    void* p = mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd.get(), 0);
    if (p == MAP_FAILED) throw std::runtime_error("cannot map " + path + ": " + strerror(errno));
    mapping_ = std::unique_ptr<void, Unmapper>(p, Unmapper{size_});
    madvise(p, size_, MADV_SEQUENTIAL);
    data_ = static_cast<const uint8_t*>(p);
  }
  uint8_t type = 0;
  const uint8_t* payload = nullptr;
  uint32_t length = 0;
  if (data_ && memcmp(data_, kMagic, kMagicSize) != 0) {
    if (const std::optional<std::string> version = other_log_version(data_, size_))
      throw std::runtime_error(path + " is an event log of format " + *version +
                               ", which this bpfprof does not read (it reads format " + kVersion +
                               "): record it again with --save-events");
  }
  if (!data_ || memcmp(data_, kMagic, kMagicSize) != 0 ||
      (position_ = kMagicSize, !read_raw(type, payload, length)) || type != kSettings)
    throw std::runtime_error(path + " is not a bpfprof event log (record with --save-events FILE)");
  ByteReader r(payload, length);
  settings_.frequency_hz = r.get<uint32_t>();
  settings_.sampling_event = r.get_string();
  settings_.off_cpu = r.get<uint8_t>() != 0;
  const std::string call_graph = r.get_string();
  const std::optional<CallGraph> mode = call_graph_named(call_graph);
  if (!mode) throw std::runtime_error("corrupt event log: unknown call graph '" + call_graph + "'");
  settings_.call_graph = *mode;
  settings_.start_time = r.get<MonotonicNs>();
  settings_.start_wall_clock_ms = r.get<double>();
}

bool EventLogReader::read_raw(uint8_t& type, const uint8_t*& payload, uint32_t& length) {
  if (position_ >= size_) return false;
  if (size_ - position_ < kRecordHeaderSize)
    throw std::runtime_error("corrupt event log " + path_ + ": truncated record");
  type = data_[position_];
  uint32_t checksum = 0;
  memcpy(&length, data_ + position_ + 1, sizeof(length));
  memcpy(&checksum, data_ + position_ + 1 + sizeof(length), sizeof(checksum));
  const size_t record_at = position_;
  position_ += kRecordHeaderSize;
  if (size_ - position_ < length)
    throw std::runtime_error("corrupt event log " + path_ + ": truncated record");
  payload = data_ + position_;
  position_ += length;
  if (record_checksum(type, payload, length) != checksum)
    throw std::runtime_error("corrupt event log " + path_ + ": damaged record at byte " +
                             std::to_string(record_at));
  // Pages read long ago are dropped, so a replay's memory is the pipeline's, not the log's.
  constexpr size_t kReleaseChunk = 8 << 20;
  if (position_ - released_ > 2 * kReleaseChunk) {
    madvise(const_cast<uint8_t*>(data_) + released_, kReleaseChunk, MADV_DONTNEED);
    released_ += kReleaseChunk;
  }
  return true;
}

std::optional<EventLogReader::Record> EventLogReader::next() {
  uint8_t type = 0;
  const uint8_t* payload = nullptr;
  uint32_t length = 0;
  if (!read_raw(type, payload, length)) return std::nullopt;
  Record record;
  switch (type) {
    case kBpfEvent:
      record.type = Record::Type::kBpfEvent;
      record.data = payload;
      record.size = length;
      return record;
    case kLifecycle:
      record.type = Record::Type::kLifecycle;
      record.lifecycle = decode_lifecycle_event(payload, length);
      return record;
    case kTrailer: {
      ByteReader r(payload, length);
      record.type = Record::Type::kTrailer;
      record.trailer.end_time = r.get<MonotonicNs>();
      record.trailer.lost_bpf_events = r.get<uint64_t>();
      record.trailer.lost_sideband_records = r.get<uint64_t>();
      return record;
    }
    default:
      throw std::runtime_error("corrupt event log " + path_ + ": unknown record type " +
                               std::to_string(type));
  }
}

}  // namespace bpfprof
