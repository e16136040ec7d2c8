#include "runtimes/python/stacks.h"

#include <chrono>
#include <cstring>
#include <string>

#include "runtimes/python/events.h"

namespace bpfprof {

namespace {

// An unnamed frame still shows where Python ran: under these names, counted in the summary.
const RuntimeFunction kPythonUnknownCode{"[unknown Python code]", "", 0};
const RuntimeFunction kPythonUnreadCode{"[unknown Python code: read budget used up]", "", 0};
// Where the BPF side stopped before the outermost frame (a chain that is a cycle ends at the
// limit too), the frames it did not read are this one frame, outermost.
const RuntimeFunction kPythonDeeperFrames{
    "[unknown Python frames: more than " + std::to_string(BPFPROF_MAX_PYTHON_FRAMES) + " deep]", "",
    0};
const RuntimeFunction kPythonUnreadableFrames{"[unknown Python frames: unreadable frame]", "", 0};
// 3.12+ begins every chain with a shim frame; one that ends without it was read between two of
// the interpreter's stores (a generator's frame unlinked from its caller before the thread's
// current frame moves on: 1-4% of a generator loop's samples under pyenv's 3.12.1).
const RuntimeFunction kPythonCutFrames{"[unknown Python frames: read mid-switch]", "", 0};

// Why the frames outside the outermost one read are unknown, if they are.
const RuntimeFunction* unknown_outer_frames(uint32_t status, bool chain_needs_shim,
                                            bool outermost_shim) {
  if (status == BPFPROF_PYTHON_STACK_AT_LIMIT) return &kPythonDeeperFrames;
  if (status == BPFPROF_PYTHON_STACK_UNREADABLE) return &kPythonUnreadableFrames;
  if (chain_needs_shim && !outermost_shim) return &kPythonCutFrames;
  return nullptr;
}

}  // namespace

void PythonStacks::take_event(const void* data, size_t size, RuntimeStats& stats) {
  bpfprof_python_stack_event e;
  const std::optional<size_t> depth =
      copy_frame_event(data, size, e, &bpfprof_python_stack_event::depth);
  if (!depth) return;
  count_frame_event(stats, size, BPFPROF_MAX_PYTHON_FRAMES);
  if (e.status == BPFPROF_PYTHON_STACK_NO_THREAD) ++stats.no_thread_state;
  if (e.status == BPFPROF_PYTHON_STACK_UNREADABLE) ++stats.unreadable;
  if (e.status == BPFPROF_PYTHON_STACK_AT_LIMIT) ++stats.at_limit;
  Pending& pending = pending_.put(e.header);
  // Counted here, not where the mappings are seen: the side band also shows processes that
  // are not recorded (bpfprof itself reading the binary, other users' interpreters).
  if (with_frames_.insert(pending.pid).second) ++stats.interpreters;
  pending.frames.clear();
  pending.status = e.status;
  pending.innermost_loop_empty = false;
  pending.outermost_shim =
      *depth > 0 && (e.frames[*depth - 1].flags & BPFPROF_PYTHON_FRAME_SHIM) != 0;
  for (size_t i = 0; i < *depth; ++i) {
    const bpfprof_python_frame& f = e.frames[i];
    // A shim frame (3.12+) is no function: it says that the frame inside it began its
    // activation, as 3.11's entry flag does.
    // Innermost, it says that the innermost activation has no frame (yet, or any more).
    if (f.flags & BPFPROF_PYTHON_FRAME_SHIM) {
      if (!pending.frames.empty())
        pending.frames.back().entry = true;
      else
        pending.innermost_loop_empty = true;
      continue;
    }
    pending.frames.push_back(PendingFrame{f.code, f.instruction, f.first_line,
                                          (f.flags & BPFPROF_PYTHON_FRAME_ENTRY) != 0});
  }
}

void PythonStacks::merge_into(Pid pid, Tid tid, MonotonicNs time, std::vector<uint64_t>& user,
                              Recording& recording) {
  const std::optional<Pending> taken = pending_.take(pid, tid, time);
  const PythonInterpreter* interpreter = processes_.find(pid);
  if (!taken || !interpreter || taken->frames.empty()) return;
  const Pending& pending = *taken;
  scratch_.clear();
  code_.start_sample();
  for (const PendingFrame& f : pending.frames)
    scratch_.push_back(
        {raw_runtime_frame(name_frame(pid, *interpreter, f, time, recording)), f.entry});
  const bool chain_needs_shim =
      interpreter->layout->entry_marking == BPFPROF_PYTHON_ENTRY_SHIM_FRAME;
  if (const RuntimeFunction* rest =
          unknown_outer_frames(pending.status, chain_needs_shim, pending.outermost_shim)) {
    // Outside the outermost frame read, in its activation (whose entry flag, when that frame
    // has one, may have been read from garbage).
    scratch_.back().entry = false;
    if (rest == &kPythonCutFrames) ++recording.stats.runtimes[RuntimeKind::kPython].unreadable;
    scratch_.push_back({raw_runtime_frame(recording.runtime_frames.intern(*rest, 0)), true});
  }
  MergedStack merged = merge_runtime_frames(
      user, scratch_, [&](uint64_t pc) { return interpreter->runs_interpreter_loop(pc); },
      ActivationMatch::kFromInnermost, pending.innermost_loop_empty);
  RuntimeStats& stats = recording.stats.runtimes[RuntimeKind::kPython];
  if (merged.mismatched) ++stats.mismatched;
  if (merged.runtime_frames > 0) ++stats.merged;
  user = std::move(merged.frames);
}

void PythonStacks::forget(Pid pid) {
  code_.forget(pid);
  named_.erase(pid);
  with_frames_.erase(pid);
  pending_.forget(pid);
}

RuntimeFrameId PythonStacks::name_frame(Pid pid, const PythonInterpreter& interpreter,
                                        const PendingFrame& f, MonotonicNs time,
                                        Recording& recording) {
  auto& named = named_[pid];
  const FrameCacheKey key{f.code, f.instruction, f.first_line};
  if (auto it = named.find(key); it != named.end()) return it->second;
  RuntimeStats& stats = recording.stats.runtimes[RuntimeKind::kPython];
  const auto start = std::chrono::steady_clock::now();
  const uint64_t reads_before = code_.objects_read();
  const uint64_t over_budget_before = code_.processes_over_budget();
  const PythonCodeResult read = code_.read(pid, interpreter, f.code, f.first_line, time);
  stats.code_objects_read += code_.objects_read() - reads_before;
  stats.read_budget_used_up += code_.processes_over_budget() - over_budget_before;
  if (!read.code) {
    // Not kept here: a later sample may read it (it was being set up, or this sample's
    // budget was spent); the reader keeps a failed address from being read at each sample.
    ++stats.unnamed_frames;
    return recording.runtime_frames.intern(
        read.status == PythonCodeStatus::kUnreadable ? kPythonUnknownCode : kPythonUnreadCode, 0);
  }
  const PythonCode* code = read.code;
  ++stats.frames;
  const uint32_t first_line = static_cast<uint32_t>(std::max(code->first_line, 0));
  // A frame that has not run its first instruction yet points just before it (-1 unit).
  const int32_t offset = static_cast<int32_t>(f.instruction);
  const std::optional<uint32_t> line =
      offset < 0 ? first_line : python_line_in(code->lines, static_cast<uint32_t>(offset) / 2);
  const RuntimeFrameId id = recording.runtime_frames.intern(
      {code->qualified_name, code->filename, first_line}, line.value_or(0));
  stats.code_read_ns += static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start)
          .count());
  if (named.size() >= limits_.named_frames_per_process) named.clear();
  named.emplace(key, id);
  return id;
}

}  // namespace bpfprof
