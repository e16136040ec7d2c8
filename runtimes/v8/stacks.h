// Puts JavaScript frames into the native stacks of V8 processes: the BPF side sends, just
// before a sample walked in the kernel, the function slot of each frame that keeps a frame
// pointer (runtimes/v8/frames.bpf.h); each slot that holds a JSFunction of a script replaces
// its native frame (JIT code's hex address, an interpreter trampoline) with the function,
// its script and its first line. The objects are read while the process lives, cached by
// their addresses and checked again at each use: the collector moves them.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtimes/v8/objects.h"
#include "runtimes/v8/processes.h"
#include "userspace/model/recording.h"

namespace bpfprof::v8 {

// The words of a SharedFunctionInfo that name it (map to script): the same words at the same
// address mean the same function.
constexpr size_t kSharedHeaderWords = 5;
using SharedHeader = std::array<uint64_t, kSharedHeaderWords>;

// The names of one process's functions, read through `heap` and cached by address.
class V8Namer {
 public:
  // The frame of the JSFunction `function`; nullopt when it is not one or has no script
  // (a builtin's frame stays native).
  std::optional<RuntimeFrameId> name(V8Heap& heap, RemoteReader& reader, uint64_t function,
                                     RuntimeFrameTable& frames, RuntimeStats& stats);

  // A function's first words as read now: its map and its SharedFunctionInfo.
  struct FunctionWords {
    uint64_t map = 0;
    uint64_t shared = 0;
    bool operator==(const FunctionWords&) const = default;
  };
  // The SharedFunctionInfo whose header decides whether `function`, with these words now, is
  // the one named before (the same words at its address: its map was checked then).
  std::optional<uint64_t> cached_shared(uint64_t function, const FunctionWords& now) const;
  // The frame named before for `shared`, if its header is still `now`; nullopt on a miss.
  std::optional<std::optional<RuntimeFrameId>> cached_frame(uint64_t shared,
                                                            const SharedHeader& now) const;
  // The frame `function` had when last named, unchecked: for the stacks of a process that
  // has exited (the reader runs behind the samples by up to a few hundred milliseconds).
  std::optional<std::optional<RuntimeFrameId>> last_known(uint64_t function) const;
  // The line of the interpreted `function` (named before, its words checked for this stack)
  // at `bytecode_offset`, from its bytecode's source positions (read once); 0: not known.
  uint32_t line_at(V8Heap& heap, uint64_t function, int32_t bytecode_offset);

 private:
  struct Named {
    SharedHeader header;
    std::optional<RuntimeFrameId> frame;
    uint64_t script = 0;
    std::optional<std::optional<SourcePositions>> positions;  // once read
  };
  struct Script {
    std::string name;
    std::vector<uint32_t> line_starts;
  };
  std::optional<RuntimeFrameId> read_function(V8Heap& heap, uint64_t shared,
                                              RuntimeFrameTable& frames, uint64_t& script_at);
  const Script& script(V8Heap& heap, uint64_t address);

  std::unordered_map<uint64_t, Named> shared_;             // by SharedFunctionInfo address
  std::unordered_map<uint64_t, FunctionWords> functions_;  // by JSFunction address
  std::unordered_map<uint64_t, Script> scripts_;           // by Script address
};

class V8Stacks {
 public:
  explicit V8Stacks(const V8Processes& processes) : processes_(processes) {}

  void take_event(const void* data, size_t size, RuntimeStats& stats);
  bool has_frames_for(Tid tid) const { return pending_.contains(tid); }
  void merge_into(Pid pid, Tid tid, MonotonicNs time, std::vector<uint64_t>& user,
                  Recording& recording);
  void forget(Pid pid);

 private:
  struct Pending {
    Pid pid;
    MonotonicNs time;
    std::vector<bpfprof_v8_frame> frames;
  };
  struct Process {
    V8Namer namer;
  };
  // The frames of `functions` from the cache, checked with two batched reads of the process;
  // nullopt where the cache cannot say.
  std::vector<std::optional<std::optional<RuntimeFrameId>>> from_cache(
      Pid pid, const V8Layout& layout, const V8Namer& namer,
      const std::vector<uint64_t>& functions);

  // The frame of `f` at its current line where it is interpreted and its bytecode's source
  // positions say; else `frame` (the function at its first line).
  static RuntimeFrameId current_frame(Pid pid, const V8Layout& layout, V8Namer& namer,
                                      const bpfprof_v8_frame& f, RuntimeFrameId frame,
                                      RuntimeFrameTable& frames);

  const V8Processes& processes_;
  std::unordered_map<Tid, Pending> pending_;
  std::unordered_map<Pid, Process> processes_seen_;
};

}  // namespace bpfprof::v8
