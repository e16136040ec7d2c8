// libFuzzer target for Go's goroutine labels as bpfprof takes them (runtimes/golabels): the
// event the BPF reader sends holds strings read from the profiled process's memory, all of it
// the process's to write. The bytes are such an event (any length); what it becomes must be a
// label set within the event's bounds whose frame name gives it back. The bytes are also read
// as a frame name (userspace/model/label_set.h): one that parses must parse the same once
// written again.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <vector>

#include "runtimes/golabels/runtime.h"
#include "runtimes/kit/pending_stacks.h"
#include "userspace/model/label_set.h"

using namespace bpfprof;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  if (const std::optional<LabelSet> parsed = parse_label_frame_name(text))
    if (parse_label_frame_name(label_frame_name(*parsed)) != parsed) abort();

  // The event as the runtime copies it, and the set it makes: bounded, and named reversibly.
  bpfprof_golabels_stack_event event;
  if (const std::optional<size_t> count =
          copy_frame_event(data, size, event, &bpfprof_golabels_stack_event::count)) {
    const LabelSet labels = label_set_of(event, *count);
    if (labels.size() > BPFPROF_MAX_GO_LABELS) abort();
    for (const auto& [key, value] : labels)
      if (key.size() > BPFPROF_GO_LABEL_KEY_BYTES + 3 ||
          value.size() > BPFPROF_GO_LABEL_VALUE_BYTES + 3)
        abort();
    if (parse_label_frame_name(label_frame_name(labels)) != labels) abort();
  }
  // And through the runtime, for a process it does not know: nothing, and no crash.
  Recording recording;
  std::unique_ptr<Runtime> runtime = make_golabels_runtime();
  runtime->take_event(data, size, recording);
  std::vector<uint64_t> user = {0x401000};
  if (size >= sizeof(bpfprof_event_header)) {
    bpfprof_event_header header;
    memcpy(&header, data, sizeof(header));
    runtime->merge_into(Pid{static_cast<int32_t>(header.pid)},
                        Tid{static_cast<int32_t>(header.tid)}, MonotonicNs{header.timestamp_ns},
                        user, recording);
  }
  if (user.size() != 1) abort();
  return 0;
}
