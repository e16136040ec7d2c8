#include "runtimes/v8/stacks.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "runtimes/kit/remote_memory.h"

namespace bpfprof::v8 {
namespace {

// Bytes read from a process to name one function (a first sight of its script's source
// included) or to find one interpreted frame's line.
constexpr uint64_t kReadBudget = 16 << 20;

// A live process's heap, read within kReadBudget.
struct LiveHeap {
  LiveHeap(Pid pid, const V8Layout& layout)
      : memory(pid), reader(memory, kReadBudget, 0), heap(layout, reader) {}
  ProcessMemory memory;
  RemoteReader reader;
  V8Heap heap;
};

}  // namespace

V8Stacks::StackObjects V8Stacks::objects_of(const V8Layout& layout,
                                            const std::vector<bpfprof_v8_frame>& frames) {
  StackObjects out;
  for (const bpfprof_v8_frame& f : frames) {
    if (std::find(out.shared.begin(), out.shared.end(), f.shared) == out.shared.end()) {
      out.shared.push_back(f.shared);
      out.shared_hashes.push_back(f.shared_hash);
    }
    if (f.bytecode && interpreted_offset(layout, f) &&
        std::find(out.bytecodes.begin(), out.bytecodes.end(), f.bytecode) == out.bytecodes.end()) {
      out.bytecodes.push_back(f.bytecode);
      out.bytecode_hashes.push_back(f.bytecode_hash);
    }
  }
  return out;
}

V8Stacks::CacheRead V8Stacks::from_cache(Pid pid, const V8Namer& namer,
                                         const StackObjects& objects) {
  const size_t functions = objects.shared.size();
  CacheRead out{std::vector<std::optional<std::optional<RuntimeFrameId>>>(functions),
                std::vector<std::optional<BytecodeHeader>>(objects.bytecodes.size())};
  // What the kernel's digests do not answer is read: the functions' headers first (a batch
  // stops at its first unreadable piece). `unread`: the pieces' indices, bytecodes' after
  // the functions'.
  std::vector<SharedHeader> headers(functions);
  std::vector<BytecodeHeader> bytecode_headers(objects.bytecodes.size());
  std::vector<MemoryPiece> pieces;
  std::vector<size_t> unread;
  for (size_t i = 0; i < functions; ++i) {
    if (objects.shared_hashes[i])
      out.frames[i] = namer.cached_frame(objects.shared[i], objects.shared_hashes[i]);
    if (out.frames[i]) continue;
    pieces.push_back({objects.shared[i] - 1, headers[i].data(), sizeof(SharedHeader)});
    unread.push_back(i);
  }
  for (size_t i = 0; i < objects.bytecodes.size(); ++i) {
    if (objects.bytecode_hashes[i]) continue;
    pieces.push_back(
        {objects.bytecodes[i] - 1, bytecode_headers[i].data(), sizeof(BytecodeHeader)});
    unread.push_back(functions + i);
  }
  if (pieces.empty()) return out;
  ProcessMemory memory(pid);
  RemoteReader reader(memory, kReadBudget, 0);
  const BatchRead batch = reader.read_batch(pieces);
  for (size_t p = 0; p < unread.size(); ++p) {
    const size_t i = unread[p];
    if (i < functions)
      out.frames[i] = batch.process_gone ? namer.last_known(objects.shared[i])
                      : batch.read[p]    ? namer.cached_frame(objects.shared[i], headers[i])
                                         : std::nullopt;
    else if (!batch.process_gone && batch.read[p])
      out.bytecode_headers[i - functions] = bytecode_headers[i - functions];
  }
  return out;
}

uint64_t V8Namer::steady_clock_ns() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

void V8Namer::Rereads::incomplete(bool incomplete, uint64_t now_ns) {
  constexpr int kMaxReads = 3;
  constexpr uint64_t kRereadAfterNs = 20'000'000;
  due_ns = incomplete && reads < kMaxReads ? now_ns + kRereadAfterNs * reads : 0;
}

const V8Namer::Script& V8Namer::script(V8Heap& heap, uint64_t address) {
  auto it = scripts_.find(address);
  if (it != scripts_.end() && !it->second.rereads.due(clock_ns_)) return it->second;
  Script script{heap.script_name(address).value_or(""),
                heap.script_line_starts(address).value_or(std::vector<uint32_t>{}),
                {}};
  if (it != scripts_.end()) script.rereads.reads = it->second.rereads.reads + 1;
  script.rereads.incomplete(script.name.empty() || script.line_starts.empty(), clock_ns_());
  return scripts_.insert_or_assign(address, std::move(script)).first->second;
}

std::optional<V8Namer::FunctionRead> V8Namer::read_function(V8Heap& heap, uint64_t shared,
                                                            uint64_t& script_at, bool& complete) {
  const std::optional<SharedInfo> info = heap.read_shared(shared);
  complete = info && !info->script;  // a builtin's, an API function's: stays native
  if (!info || !info->script) return std::nullopt;
  script_at = info->script;
  const Script& s = script(heap, info->script);
  if (s.name.empty()) return std::nullopt;  // eval'd code, internal scripts without a name
  const uint32_t line = line_of_position(s.line_starts, info->start_position);
  complete = line > 0;
  return FunctionRead{
      {info->name.empty() ? "(anonymous)" : info->name, s.name, line, RuntimeKind::kV8}, line};
}

// A function read without its first line (the collector moving its script's source: node 22's
// first 10 ms) is a provisional frame until a reread finds the line; the samples taken
// meanwhile then show it too.
std::optional<RuntimeFrameId> V8Namer::frame_of(const std::optional<FunctionRead>& read,
                                                const Named* before, RuntimeFrameTable& frames,
                                                bool& provisional) {
  if (!read) return std::nullopt;
  const bool was_provisional = before && before->provisional && before->frame;
  provisional = read->line == 0;
  if (provisional)
    return was_provisional ? *before->frame : frames.intern_provisional(read->function);
  if (was_provisional) return frames.complete(*before->frame, read->function, read->line);
  return frames.intern(read->function, read->line);
}

std::optional<std::optional<RuntimeFrameId>> V8Namer::cached_frame(uint64_t shared,
                                                                   const SharedHeader& now) const {
  auto it = shared_.find(shared);
  if (it == shared_.end() || it->second.header != now || it->second.rereads.due(clock_ns_))
    return std::nullopt;
  return it->second.frame;
}

std::optional<std::optional<RuntimeFrameId>> V8Namer::cached_frame(uint64_t shared,
                                                                   uint64_t now_hash) const {
  auto it = shared_.find(shared);
  if (it == shared_.end() || header_hash(it->second.header) != now_hash ||
      it->second.rereads.due(clock_ns_))
    return std::nullopt;
  return it->second.frame;
}

std::optional<std::optional<RuntimeFrameId>> V8Namer::last_known(uint64_t shared) const {
  auto named = shared_.find(shared);
  if (named == shared_.end()) return std::nullopt;
  return named->second.frame;
}

const std::optional<SourcePositions>& V8Namer::positions(V8Heap& heap, RemoteReader& reader,
                                                         uint64_t bytecode,
                                                         const BytecodeSeen& seen) {
  static const std::optional<SourcePositions> kNone;
  auto it = positions_.find(bytecode);
  if (seen.hash && it != positions_.end() && header_hash(it->second.header) == seen.hash)
    return it->second.table;
  BytecodeHeader header{};
  if (seen.words)
    header = *seen.words;
  else if (!reader.read(bytecode - 1, header.data(), sizeof(header)))
    return kNone;
  // Other words at a cached address: another BytecodeArray, or this one with its table made.
  if (it != positions_.end() && it->second.header == header) return it->second.table;
  return positions_.insert_or_assign(bytecode, Positions{header, heap.bytecode_positions(bytecode)})
      .first->second.table;
}

uint32_t V8Namer::line_at(V8Heap& heap, RemoteReader& reader, uint64_t shared, uint64_t bytecode,
                          int32_t bytecode_offset, const BytecodeSeen& seen) {
  auto named = shared_.find(shared);
  if (named == shared_.end() || !named->second.frame) return 0;
  auto script = scripts_.find(named->second.script);
  if (script == scripts_.end()) return 0;
  BytecodeSeen known = seen;
  if (!bytecode) {
    bytecode = heap.bytecode_of(shared).value_or(0);
    known = {};  // seen for another address, if at all
  }
  if (!bytecode) return 0;
  const std::optional<SourcePositions>& table = positions(heap, reader, bytecode, known);
  if (!table) return 0;
  return line_of_position(script->second.line_starts, script_offset_at(*table, bytecode_offset));
}

std::optional<RuntimeFrameId> V8Namer::name(V8Heap& heap, RemoteReader& reader, uint64_t shared,
                                            RuntimeFrameTable& frames, RuntimeStats& stats) {
  SharedHeader header{};
  if (!reader.read(shared - 1, header.data(), sizeof(header))) return std::nullopt;
  auto it = shared_.find(shared);
  // A cached address whose words changed holds another function now (moved, collected).
  const bool same = it != shared_.end() && it->second.header == header;
  if (same && !it->second.rereads.due(clock_ns_)) return it->second.frame;
  const uint64_t start = clock_ns_();
  Named named{header, std::nullopt, 0, {}, false};
  if (same) named.rereads.reads = it->second.rereads.reads + 1;
  bool complete = false;
  const std::optional<FunctionRead> read = read_function(heap, shared, named.script, complete);
  named.frame = frame_of(read, same ? &it->second : nullptr, frames, named.provisional);
  named.rereads.incomplete(!complete, start);
  stats.code_objects_read += 1;
  stats.code_read_ns += clock_ns_() - start;
  return shared_.insert_or_assign(shared, named).first->second.frame;
}

void V8Stacks::take_event(const void* data, size_t size, RuntimeStats& stats) {
  bpfprof_v8_stack_event e{};
  const std::optional<size_t> count =
      copy_frame_event(data, size, e, &bpfprof_v8_stack_event::count);
  if (!count) return;
  stats.event_bytes += size;  // its stack is counted when it comes, in a V8 process
  pending_.put(e.header).frames.assign(e.frames, e.frames + *count);
}

std::optional<int32_t> V8Stacks::interpreted_offset(const V8Layout& layout,
                                                    const bpfprof_v8_frame& f) {
  // The slot holds the offset into the BytecodeArray object: its header, less the tag.
  const int32_t offset = f.bytecode_offset - static_cast<int32_t>(layout.bytecode_array_data) + 1;
  if (f.bytecode_offset < 0 || offset < 0 || (f.depth & BPFPROF_V8_FRAME_FROM_REGISTER))
    return std::nullopt;
  return offset;
}

RuntimeFrameId V8Stacks::current_frame(Pid pid, const V8Layout& layout, V8Namer& namer,
                                       const bpfprof_v8_frame& f, RuntimeFrameId frame,
                                       const BytecodeSeen& seen, RuntimeFrameTable& frames) {
  const std::optional<int32_t> offset = interpreted_offset(layout, f);
  if (!offset) return frame;
  LiveHeap live(pid, layout);
  const uint32_t line = namer.line_at(live.heap, live.reader, f.shared, f.bytecode, *offset, seen);
  return line ? frames.intern(frames.function_of(frame), line) : frame;
}

void V8Stacks::merge_into(Pid pid, Tid tid, MonotonicNs time, std::vector<uint64_t>& user,
                          Recording& recording) {
  const std::optional<Pending> pending = pending_.take(pid, tid, time);
  const V8Layout* layout = processes_.find(pid);
  if (!pending || !layout) return;
  RuntimeStats& stats = recording.stats.runtimes[RuntimeKind::kV8];
  Process& process = processes_seen_[pid];
  stats.stacks += 1;
  const StackObjects objects = objects_of(*layout, pending->frames);
  const std::vector<uint64_t>& shared = objects.shared;
  const std::vector<uint64_t>& bytecodes = objects.bytecodes;
  CacheRead cached = from_cache(pid, process.namer, objects);
  auto& frames = cached.frames;
  for (size_t i = 0; i < shared.size(); ++i) {
    if (frames[i]) continue;
    LiveHeap live(pid, *layout);
    frames[i] =
        process.namer.name(live.heap, live.reader, shared[i], recording.runtime_frames, stats);
  }
  size_t placed = 0;
  for (const bpfprof_v8_frame& f : pending->frames) {
    const uint32_t depth = f.depth & ~BPFPROF_V8_FRAME_FROM_REGISTER;
    const size_t i = std::find(shared.begin(), shared.end(), f.shared) - shared.begin();
    if (depth >= user.size() || !*frames[i]) continue;
    const size_t b = std::find(bytecodes.begin(), bytecodes.end(), f.bytecode) - bytecodes.begin();
    BytecodeSeen seen;
    if (b < bytecodes.size() && cached.bytecode_headers[b])
      seen.words = &*cached.bytecode_headers[b];
    if (b < bytecodes.size()) seen.hash = objects.bytecode_hashes[b];
    user[depth] = raw_runtime_frame(
        current_frame(pid, *layout, process.namer, f, **frames[i], seen, recording.runtime_frames));
    ++placed;
  }
  stats.frames += placed;
  if (placed) stats.merged += 1;
}

void V8Stacks::forget(Pid pid) {
  processes_seen_.erase(pid);
  pending_.forget(pid);
}

}  // namespace bpfprof::v8
