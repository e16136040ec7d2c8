// A saved recording: the raw BPF ring-buffer events and the lifecycle events from other
// sources (perf side-band, /proc snapshots, the launcher), in the order the recorder
// processed them, so `bpfprof replay` can run the same userspace path (decode, unwind,
// model, writer) again, e.g. to measure its throughput or to debug it.
//
// Format: a magic line, then records of { u8 type, u32 length, payload } in host byte
// order (a log is read on the machine that wrote it: its binaries are needed anyway).
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "userspace/model/recording.h"

namespace bpfprof {

// What a replay needs to know about the recording besides its events.
struct RecordingSettings {
  uint32_t frequency_hz = 0;
  std::string sampling_event;
  bool off_cpu = false;
  CallGraph call_graph = CallGraph::kFramePointers;
  MonotonicNs start_time;
  double start_wall_clock_ms = 0;
};

struct RecordingTrailer {
  MonotonicNs end_time;
  uint64_t lost_bpf_events = 0;
  uint64_t lost_sideband_records = 0;
};

struct FileCloser {
  void operator()(FILE* f) const { fclose(f); }
};
using UniqueFile = std::unique_ptr<FILE, FileCloser>;

class EventLogWriter {
 public:
  // Creates the file readable by its owner only (it holds raw stack bytes). Throws
  // std::runtime_error with a one-line message if the file cannot be created.
  EventLogWriter(const std::string& path, const RecordingSettings& settings);

  void write_bpf_event(const void* data, size_t size);
  void write_lifecycle_events(const std::vector<LifecycleEvent>& events, size_t from);
  // Those of one kind only.
  template <typename Payload>
  void write_lifecycle_events(const std::vector<LifecycleEvent>& events, size_t from) {
    for (size_t i = from; i < events.size(); ++i)
      if (std::holds_alternative<Payload>(events[i].payload)) write_lifecycle_event(events[i]);
  }
  // Writes the trailer and flushes; throws if the data did not reach the file.
  void finish(const RecordingTrailer& trailer);
  uint64_t bytes_written() const { return bytes_; }

 private:
  void write_lifecycle_event(const LifecycleEvent& event);
  void write_record(uint8_t type, const void* data, size_t size);
  void note_failure();

  UniqueFile file_;
  std::string path_;
  std::vector<uint8_t> scratch_;
  uint64_t bytes_ = 0;
  int failed_errno_ = 0;  // of the first write that failed
};

class EventLogReader {
 public:
  // Throws std::runtime_error with a one-line message if the file is missing or not a log.
  explicit EventLogReader(const std::string& path);

  const RecordingSettings& settings() const { return settings_; }

  struct Record {
    enum class Type : uint8_t { kBpfEvent, kLifecycle, kTrailer };
    Type type;
    const uint8_t* data = nullptr;  // kBpfEvent: the raw event, valid as long as the reader
    size_t size = 0;
    std::optional<LifecycleEvent> lifecycle;
    RecordingTrailer trailer;
  };
  // The next record, or nullopt at the end. Throws std::runtime_error on a corrupt record.
  std::optional<Record> next();

 private:
  // The next record's type and payload (in the mapped file); false at the end.
  bool read_raw(uint8_t& type, const uint8_t*& payload, uint32_t& length);

  struct Unmapper {
    size_t size;
    void operator()(void* p) const;
  };
  std::string path_;
  std::unique_ptr<void, Unmapper> mapping_{nullptr, Unmapper{0}};  // the whole file, read-only
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  size_t position_ = 0;
  size_t released_ = 0;  // the mapping before this offset was given back
  RecordingSettings settings_;
};

// Exposed for tests: the lifecycle event encoding.
std::vector<uint8_t> encode_lifecycle_event(const LifecycleEvent& event);
LifecycleEvent decode_lifecycle_event(const uint8_t* data, size_t size);

}  // namespace bpfprof
