// Events and lookups the session model's tests share.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>

#include "userspace/model/session_model.h"

namespace bpfprof::model_test {

inline MonotonicNs ms(uint64_t v) { return MonotonicNs{v * 1000000}; }

inline MmapEvent mmap_event(int pid, uint64_t start, uint64_t length, uint64_t offset,
                            std::string path) {
  MmapEvent e;
  e.pid = Pid{pid};
  e.tid = Tid{pid};
  e.mapping.start = start;
  e.mapping.length = length;
  e.mapping.file_offset = offset;
  e.mapping.path = std::move(path);
  return e;
}

// The latest thread entry with that tid.
inline const Thread& thread_with_tid(const SessionModel& model, int tid) {
  for (auto it = model.threads().rbegin(); it != model.threads().rend(); ++it)
    if (it->tid == Tid{tid}) return *it;
  throw std::runtime_error("no such thread");
}

}  // namespace bpfprof::model_test
