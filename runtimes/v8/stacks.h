// Puts JavaScript frames into the native stacks of V8 processes: the BPF side sends, just
// before a sample walked in the kernel, the SharedFunctionInfo of each frame that keeps a
// frame pointer and a JSFunction (runtimes/v8/frames.bpf.h); each that belongs to a script
// replaces its native frame (JIT code's hex address, an interpreter trampoline) with the
// function, its script and its first line, an interpreted frame's at its current line. The
// objects are read while the process lives, cached by their addresses and checked again at
// each use: the collector may move or free them.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtimes/kit/pending_stacks.h"
#include "runtimes/v8/objects.h"
#include "runtimes/v8/processes.h"
#include "userspace/model/recording.h"

namespace bpfprof::v8 {

// The words of a SharedFunctionInfo that name it (map to script): the same words at the same
// address mean the same function.
constexpr size_t kSharedHeaderWords = BPFPROF_V8_SHARED_HEADER_WORDS;
using SharedHeader = std::array<uint64_t, kSharedHeaderWords>;

// The words of a BytecodeArray before its bytecodes (map, length, constant pool, handler and
// source position tables, ...): the same words at the same address mean the same bytecode,
// with the same position table (V8 makes one lazily: the words change then).
constexpr size_t kBytecodeHeaderWords = BPFPROF_V8_BYTECODE_HEADER_WORDS;
using BytecodeHeader = std::array<uint64_t, kBytecodeHeaderWords>;

// The digest of a header that the kernel sends with a frame (runtimes/v8/events.h).
template <size_t N>
uint64_t header_hash(const std::array<uint64_t, N>& words) {
  std::array<__u64, N> same{};  // another spelling of the type in C
  std::copy(words.begin(), words.end(), same.begin());
  return bpfprof_v8_header_hash(same.data(), N);
}

// What a stack says of a BytecodeArray's header: the words read for it, or the digest the
// kernel sent; neither: the header is read when needed.
struct BytecodeSeen {
  const BytecodeHeader* words = nullptr;
  uint64_t hash = 0;
};

// The names of one process's functions, read through `heap` and cached by address.
class V8Namer {
 public:
  // `clock_ns`: monotonic nanoseconds, when a read that came out incomplete is due again.
  using Clock = std::function<uint64_t()>;
  explicit V8Namer(Clock clock_ns = steady_clock_ns) : clock_ns_(std::move(clock_ns)) {}
  static uint64_t steady_clock_ns();

  // The frame of the SharedFunctionInfo `shared`; nullopt when it is not one or has no
  // script (a builtin's frame stays native).
  std::optional<RuntimeFrameId> name(V8Heap& heap, RemoteReader& reader, uint64_t shared,
                                     RuntimeFrameTable& frames, RuntimeStats& stats);
  // The frame named before for `shared`, if its header is still `now`; nullopt on a miss.
  std::optional<std::optional<RuntimeFrameId>> cached_frame(uint64_t shared,
                                                            const SharedHeader& now) const;
  // The same, by the digest of its header now (the kernel's).
  std::optional<std::optional<RuntimeFrameId>> cached_frame(uint64_t shared,
                                                            uint64_t now_hash) const;
  // The frame `shared` had when last named, unchecked: for the stacks of a process that has
  // exited (the reader runs behind the samples by up to a poll interval).
  std::optional<std::optional<RuntimeFrameId>> last_known(uint64_t shared) const;
  // The line of an interpreted frame of `shared` (named, its header checked for this stack)
  // at `bytecode_offset` in `bytecode` (the frame's BytecodeArray; 0: its function data's),
  // from the bytecode's source positions; 0: not known. `seen`: what this stack says of the
  // BytecodeArray's header.
  uint32_t line_at(V8Heap& heap, RemoteReader& reader, uint64_t shared, uint64_t bytecode,
                   int32_t bytecode_offset, const BytecodeSeen& seen = {});

 private:
  // What was read incompletely (a name or line missing: the collector may have been moving
  // the object being read, or the string is of a kind not read) is read again a few times,
  // a little later each time.
  struct Rereads {
    int reads = 1;
    uint64_t due_ns = 0;  // 0: complete, or read often enough
    // The clock is read only for an entry that waits for a reread (most are complete).
    bool due(const Clock& clock_ns) const { return due_ns && clock_ns() >= due_ns; }
    void incomplete(bool incomplete, uint64_t now_ns);
  };
  struct Named {
    SharedHeader header;
    std::optional<RuntimeFrameId> frame;
    uint64_t script = 0;
    Rereads rereads;
    bool provisional = false;  // named without its first line (RuntimeFrameTable)
  };
  struct Positions {
    BytecodeHeader header;
    std::optional<SourcePositions> table;
  };
  struct Script {
    std::string name;
    std::vector<uint32_t> line_starts;
    Rereads rereads;
  };
  struct FunctionRead {
    RuntimeFunction function;
    uint32_t line = 0;  // its first line; 0: its script's lines not read
  };
  // The function; `complete` false when its name or line could not be read.
  std::optional<FunctionRead> read_function(V8Heap& heap, uint64_t shared, uint64_t& script_at,
                                            bool& complete);
  // The frame of what `read` found; `before`: the same function's entry of an earlier read.
  static std::optional<RuntimeFrameId> frame_of(const std::optional<FunctionRead>& read,
                                                const Named* before, RuntimeFrameTable& frames,
                                                bool& provisional);
  const Script& script(V8Heap& heap, uint64_t address);
  const std::optional<SourcePositions>& positions(V8Heap& heap, RemoteReader& reader,
                                                  uint64_t bytecode, const BytecodeSeen& seen);

  Clock clock_ns_;
  std::unordered_map<uint64_t, Named> shared_;         // by SharedFunctionInfo address
  std::unordered_map<uint64_t, Positions> positions_;  // by BytecodeArray address
  std::unordered_map<uint64_t, Script> scripts_;       // by Script address
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
  // The objects of one stack, each once (a recursion repeats one many times), with the
  // digests of their headers that the kernel sent (0: none).
  struct StackObjects {
    std::vector<uint64_t> shared, shared_hashes;
    std::vector<uint64_t> bytecodes, bytecode_hashes;  // of interpreted frames
  };
  static StackObjects objects_of(const V8Layout& layout,
                                 const std::vector<bpfprof_v8_frame>& frames);
  // What the cache says for a stack: the frames of its functions (nullopt where the cache
  // cannot say), and the headers of its interpreted frames' BytecodeArrays, which their lines
  // are checked by (nullopt: not read; not needed where the kernel sent their digest). Checked
  // by the kernel's digests; what has none, by one batched read of the process.
  struct CacheRead {
    std::vector<std::optional<std::optional<RuntimeFrameId>>> frames;  // by `shared`
    std::vector<std::optional<BytecodeHeader>> bytecode_headers;       // by `bytecodes`
  };
  static CacheRead from_cache(Pid pid, const V8Namer& namer, const StackObjects& objects);

  // The offset into its BytecodeArray's data of an interpreted frame `f`; nullopt for any other.
  static std::optional<int32_t> interpreted_offset(const V8Layout& layout,
                                                   const bpfprof_v8_frame& f);
  // The frame of `f` at its current line where it is interpreted and its bytecode's source
  // positions say; else `frame` (the function at its first line). `seen`: its
  // BytecodeArray's header, as this stack says it.
  static RuntimeFrameId current_frame(Pid pid, const V8Layout& layout, V8Namer& namer,
                                      const bpfprof_v8_frame& f, RuntimeFrameId frame,
                                      const BytecodeSeen& seen, RuntimeFrameTable& frames);

  const V8Processes& processes_;
  PendingStacks<Pending> pending_;
  std::unordered_map<Pid, Process> processes_seen_;
};

}  // namespace bpfprof::v8
