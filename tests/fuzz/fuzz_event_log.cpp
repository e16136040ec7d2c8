// libFuzzer target for saved event streams (`bpfprof replay`). An input that starts like an
// event log is read as one file: records checked, every BPF event decoded and every
// lifecycle event applied, the stream fed through the ingest pipeline into the model. Any
// other input is a run of [u16 length][BPF event] fed to the same pipeline directly, so that
// the decoder and the model meet hostile events past the log's checksums. A corrupt stream
// may only give a std::runtime_error (one line and exit 2 in replay), never a crash, a hang
// or a leak.
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>

#include "symbols/util/unique_handle.h"
#include "userspace/capture/event_log.h"
#include "userspace/capture/ingest.h"

using namespace bpfprof;

namespace {

void replay(const std::string& path) {
  EventLogReader reader(path);
  Recording recording = recording_for(reader.settings());
  // No unwinder: a hostile stream names files that must not be opened (a FIFO would hang).
  IngestPipeline pipeline(recording, {.dwarf = false, .live_processes = false});
  replay_events(reader, pipeline, /*events_per_batch=*/64);
  pipeline.finish(recording.end_time);
}

// Events without a log around them.
void decode_raw_events(const uint8_t* data, size_t size) {
  Recording recording;
  IngestPipeline pipeline(recording, {.dwarf = false, .live_processes = false});
  while (size >= 2) {
    const size_t length = std::min<size_t>(size - 2, data[0] | data[1] << 8);
    pipeline.take_bpf_event(data + 2, length);
    data += 2 + length, size -= 2 + length;
  }
  pipeline.finish(MonotonicNs{UINT64_MAX / 2});
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static constexpr char kMagic[] = "bpfprof event log";
  if (size < sizeof(kMagic) - 1 || memcmp(data, kMagic, sizeof(kMagic) - 1) != 0) {
    decode_raw_events(data, size);
    return 0;
  }
  UniqueFd file(memfd_create("fuzz-event-log", MFD_CLOEXEC));
  if (!file.valid()) return 0;
  if (size && write(file.get(), data, size) != static_cast<ssize_t>(size)) return 0;
  try {
    replay("/proc/self/fd/" + std::to_string(file.get()));
  } catch (const std::runtime_error&) {
  }
  return 0;
}
