// Puts Python frames into the native stacks: the BPF side sends a thread's Python frames just
// before its sample (or off-CPU stack), with the same header; the decoder hands each native
// user stack here, and every native _PyEval_EvalFrameDefault frame is replaced by the Python
// frames its activation was running (up to the frame marked as the activation's entry),
// innermost first. The code objects are named as the stacks arrive, while the process lives.
// Where the BPF side stopped before the outermost frame (deeper than it reads, a frame it
// could not read), one "[unknown Python frames: ...]" frame stands for the rest.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "runtimes/kit/merge.h"
#include "runtimes/kit/pending_stacks.h"
#include "runtimes/python/code.h"
#include "runtimes/python/processes.h"
#include "userspace/model/recording.h"

namespace bpfprof {

class PythonStacks {
 public:
  explicit PythonStacks(const PythonProcesses& processes, PythonReadLimits limits = {})
      : processes_(processes), limits_(limits), code_(limits) {}

  // A BPFPROF_EVENT_PYTHON_STACK event: kept for the sample of its thread that follows.
  void take_event(const void* data, size_t size, RuntimeStats& stats);
  // The user stack `user` (innermost first) of the sample of `tid` at `time`, with the
  // Python frames sent for it merged in (unchanged when none were).
  void merge_into(Pid pid, Tid tid, MonotonicNs time, std::vector<uint64_t>& user,
                  Recording& recording);
  // Whether Python frames wait for a sample of `tid` (else merge_into changes nothing).
  bool has_frames_for(Tid tid) const { return pending_.contains(tid); }
  void forget(Pid pid);
  // How many frames of `pid` have their names cached.
  size_t named_frames(Pid pid) const {
    auto it = named_.find(pid);
    return it == named_.end() ? 0 : it->second.size();
  }

 private:
  struct PendingFrame {
    uint64_t code;
    uint32_t instruction;
    int32_t first_line;
    bool entry;
  };
  struct Pending {
    Pid pid;  // so that a process's threads' leftovers go with it
    MonotonicNs time;
    std::vector<PendingFrame> frames;
    uint32_t status;  // bpfprof_python_stack_status: whether frames beyond these were left
    bool innermost_loop_empty = false;  // a shim frame came first
    bool outermost_shim = false;        // the last frame read was a shim (3.12+: a whole chain)
  };
  struct FrameCacheKey {
    uint64_t code;
    uint32_t instruction;
    int32_t first_line;
    bool operator==(const FrameCacheKey&) const = default;
  };
  struct FrameCacheKeyHash {
    size_t operator()(const FrameCacheKey& k) const noexcept {
      return std::hash<uint64_t>{}(k.code * 31 +
                                   (uint64_t{k.instruction} << 32 | uint32_t(k.first_line)));
    }
  };
  RuntimeFrameId name_frame(Pid pid, const PythonInterpreter& interpreter, const PendingFrame& f,
                            MonotonicNs time, Recording& recording);

  const PythonProcesses& processes_;
  PythonReadLimits limits_;
  PythonCodeReader code_;
  PendingStacks<Pending> pending_;
  std::unordered_map<Pid, std::unordered_map<FrameCacheKey, RuntimeFrameId, FrameCacheKeyHash>>
      named_;
  std::vector<ActivationFrame> scratch_;
  std::unordered_set<Pid> with_frames_;  // processes whose stacks came
};

}  // namespace bpfprof
