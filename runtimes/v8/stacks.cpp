#include "runtimes/v8/stacks.h"

#include <unistd.h>

#include <chrono>
#include <cstring>

#include "runtimes/hotspot/remote_memory.h"

namespace bpfprof::v8 {
namespace {

// Bytes read from a process for one stack: its functions' checks, a first sight of a script's
// source.
constexpr uint64_t kStackReadBudget = 16 << 20;
constexpr uint64_t kPerfMapRecheckNs = 1'000'000'000;

uint64_t now_ns() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

}  // namespace

const V8Namer::Script& V8Namer::script(V8Heap& heap, uint64_t address) {
  auto it = scripts_.find(address);
  if (it != scripts_.end()) return it->second;
  Script script{heap.script_name(address).value_or(""),
                heap.script_line_starts(address).value_or(std::vector<uint32_t>{})};
  return scripts_.emplace(address, std::move(script)).first->second;
}

std::optional<RuntimeFrameId> V8Namer::read_function(V8Heap& heap, uint64_t shared,
                                                     RuntimeFrameTable& frames) {
  const std::optional<SharedInfo> info = heap.read_shared(shared);
  if (!info || !info->script) return std::nullopt;
  const Script& s = script(heap, info->script);
  if (s.name.empty()) return std::nullopt;  // eval'd code, internal scripts without a name
  const uint32_t line = line_of_position(s.line_starts, info->start_position);
  RuntimeFunction function{info->name.empty() ? "(anonymous)" : info->name, s.name, line,
                           RuntimeKind::kV8};
  return frames.intern(function, line);
}

std::optional<RuntimeFrameId> V8Namer::name(V8Heap& heap, RemoteReader& reader, uint64_t function,
                                            RuntimeFrameTable& frames, RuntimeStats& stats) {
  const std::optional<uint64_t> shared = heap.shared_of_function(function);
  if (!shared) return std::nullopt;
  SharedHeader header{};
  if (!reader.read(*shared - 1, header.data(), sizeof(header))) return std::nullopt;
  auto it = shared_.find(*shared);
  // A cached address whose words changed holds another function now (moved, collected).
  if (it != shared_.end() && it->second.header == header) return it->second.frame;
  const uint64_t start = now_ns();
  Named named{header, read_function(heap, *shared, frames)};
  stats.code_objects_read += 1;
  stats.code_read_ns += now_ns() - start;
  return shared_.insert_or_assign(*shared, named).first->second.frame;
}

void V8Stacks::take_event(const void* data, size_t size, RuntimeStats& stats) {
  bpfprof_v8_stack_event e{};
  const size_t head = offsetof(bpfprof_v8_stack_event, frames);
  if (size < head) return;
  std::memcpy(&e, data, std::min(size, sizeof(e)));
  const size_t count =
      std::min<size_t>({e.count, BPFPROF_MAX_V8_FRAMES, (size - head) / sizeof(bpfprof_v8_frame)});
  stats.event_bytes += size;
  Pending& pending = pending_[Tid{static_cast<int32_t>(e.header.tid)}];
  pending.pid = Pid{static_cast<int32_t>(e.header.pid)};
  pending.time = MonotonicNs{e.header.timestamp_ns};
  pending.frames.assign(e.frames, e.frames + count);
}

bool V8Stacks::has_perf_map(Pid pid, MonotonicNs time, Process& process) {
  if (process.perf_map_checked.value &&
      time.value < process.perf_map_checked.value + kPerfMapRecheckNs)
    return process.perf_map;
  process.perf_map_checked = time;
  const std::string path = "/tmp/perf-" + std::to_string(pid.value) + ".map";
  process.perf_map = access(path.c_str(), F_OK) == 0;
  return process.perf_map;
}

void V8Stacks::merge_into(Pid pid, Tid tid, MonotonicNs time, std::vector<uint64_t>& user,
                          Recording& recording) {
  auto it = pending_.find(tid);
  if (it == pending_.end()) return;
  Pending pending = std::move(it->second);
  pending_.erase(it);
  const V8Layout* layout = processes_.find(pid);
  fprintf(stderr, "merge %d t=%lu pt=%lu layout=%d n=%zu\n", tid.value, time.value,
          pending.time.value, layout != nullptr, pending.frames.size());
  if (!layout || pending.pid != pid || pending.time != time) return;
  RuntimeStats& stats = recording.stats.runtimes[RuntimeKind::kV8];
  Process& process = processes_seen_[pid];
  stats.stacks += 1;
  if (has_perf_map(pid, time, process)) return;
  hotspot::ProcessMemory memory(pid);
  RemoteReader reader(memory, kStackReadBudget, 0);
  V8Heap heap(*layout, reader);
  std::unordered_map<uint64_t, std::optional<RuntimeFrameId>> this_stack;
  size_t placed = 0;
  for (const bpfprof_v8_frame& f : pending.frames) {
    const uint32_t depth = f.depth & ~BPFPROF_V8_FRAME_FROM_REGISTER;
    if (depth >= user.size()) continue;
    auto [known, fresh] = this_stack.try_emplace(f.function);
    if (fresh)
      known->second = process.namer.name(heap, reader, f.function, recording.runtime_frames, stats);
    if (!known->second) continue;
    user[depth] = raw_runtime_frame(*known->second);
    ++placed;
  }
  fprintf(stderr, "placed %zu of %zu budget %lu\n", placed, pending.frames.size(),
          reader.bytes_read());
  stats.frames += placed;
  if (placed) stats.merged += 1;
}

void V8Stacks::forget(Pid pid) {
  processes_seen_.erase(pid);
  std::erase_if(pending_, [&](const auto& entry) { return entry.second.pid == pid; });
}

}  // namespace bpfprof::v8
