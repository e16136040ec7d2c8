#include "runtimes/hotspot/runtime.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <optional>
#include <string>
#include <unordered_map>

#include "runtimes/hotspot/code_cache.h"
#include "runtimes/hotspot/events.h"
#include "runtimes/hotspot/layout.h"
#include "runtimes/hotspot/names.h"
#include "runtimes/hotspot/thread_names.h"
#include "runtimes/hotspot/vm_structs.h"
#include "runtimes/kit/pending_stacks.h"
#include "runtimes/kit/process_tracker.h"

namespace bpfprof {
namespace {

using hotspot::CodeCacheError;
using hotspot::HotSpotLayout;
using hotspot::JavaFrameNamer;
using hotspot::LayoutMissing;
using hotspot::VmStructs;
using hotspot::VmStructsError;

const RuntimeFunction kUnnamedJava{"[unknown Java frame]", "", 0, RuntimeKind::kHotSpot};

// What a noted frame's names depend on: its Method* (or the word read in its place), what
// the walk noted besides (bytecode pointer, blob, name pointer), its pc, its kind.
struct NotedFrame {
  uint64_t method;
  uint64_t aux;
  uint32_t pc_low;
  uint8_t kind;
  bool leaf;  // a leaf's pc takes the next PcDesc, a return address its own
  bool operator==(const NotedFrame&) const = default;
};
struct NotedFrameHash {
  size_t operator()(const NotedFrame& k) const {
    uint64_t h = k.method * 0x9E3779B97F4A7C15ull;
    h = (h ^ k.aux) * 0xC2B2AE3D27D4EB4Full;
    return static_cast<size_t>(h ^ (uint64_t{k.pc_low} << 9) ^ (k.kind << 1) ^ k.leaf);
  }
};

// A JVM found, read once its tables and code cache are set up.
struct Jvm {
  explicit Jvm(Pid pid) : memory(pid) {}
  ProcessMemory memory;
  std::optional<hotspot::JvmLibrary> library;  // where its tables are, once found
  HotSpotLayout layout;
  std::unique_ptr<JavaFrameNamer> namer;                   // set once the layout is
  std::unique_ptr<hotspot::JavaThreadNames> thread_names;  // where the layout has them
  // A frame's names, innermost first, by what the walk noted and its pc's low bits.
  std::unordered_map<NotedFrame, std::vector<RuntimeFrameId>, NotedFrameHash> frames;
  int attempts = 0;
  std::chrono::steady_clock::time_point next_attempt{};
  std::chrono::milliseconds reread_interval{40};     // doubles up to kRereadInterval
  std::optional<bpfprof_hotspot_process> in_kernel;  // the entry the kernel has
  bool given_up = false;
};

class HotSpotRuntime final : public Runtime {
 public:
  RuntimeKind kind() const override { return RuntimeKind::kHotSpot; }

  void observe(const std::vector<LifecycleEvent>& events, size_t from,
               Recording& recording) override {
    (void)recording;
    tracker_.observe(
        events, from, [&](Pid pid, const MappingInfo&) { jvms_.try_emplace(pid, pid); },
        [&](Pid pid) { forget(pid); });  // an exec: the new image's mappings follow
  }

  void forget_exited() override {
    for (Pid pid : tracker_.take_exited()) forget(pid);
  }

  void apply_kernel_changes(RuntimeKernelMaps& maps, Recording& recording) override {
    for (Pid pid : std::exchange(gone_, {})) maps.erase(kMap, pid);
    const auto now = std::chrono::steady_clock::now();
    for (auto& [pid, jvm] : jvms_) {
      if (jvm.given_up || now < jvm.next_attempt) continue;
      set_up(pid, jvm, maps, stats(recording));
      if (jvm.in_kernel) read_thread_names(pid, jvm, recording);
      jvm.next_attempt = now + (jvm.in_kernel ? jvm.reread_interval : kRetryInterval);
      if (jvm.in_kernel) jvm.reread_interval = std::min(2 * jvm.reread_interval, kRereadInterval);
    }
    uint32_t count = 0;
    for (const auto& [pid, jvm] : jvms_) count += jvm.in_kernel ? 1 : 0;
    maps.set_process_count(kind(), count);
  }

  bool setting_up() const override {
    return std::any_of(jvms_.begin(), jvms_.end(), [](const auto& entry) {
      return !entry.second.in_kernel && !entry.second.given_up;
    });
  }

  void take_event(const void* data, size_t size, Recording& recording) override;
  void merge_into(Pid pid, Tid tid, MonotonicNs time, std::vector<uint64_t>& user,
                  Recording& recording) override;

 private:
  static constexpr const char* kMap = "hotspot_processes";
  // A JVM fills its tables and sets up its code cache and interpreter in its first tens of
  // milliseconds; one that has not after this many tries (or whose tables make no sense)
  // keeps native frames. A try before then costs a few reads.
  static constexpr auto kRetryInterval = std::chrono::milliseconds(10);
  static constexpr int kMaxAttempts = 1000;
  // The code cache is read again once in the kernel, in case it was read while the JVM was
  // still adding heaps and generating its interpreter: after 40 ms, then twice as long each
  // time up to this. (Every 500 ms from the first read left the interpreter's frames of a
  // JVM's first half second unnamed, 9% of a 4 s run's Java samples, in a fresh clone.)
  static constexpr auto kRereadInterval = std::chrono::milliseconds(500);
  // A stack's frames with inlined methods added stop growing here (each compiled frame
  // can add up to kMaxScopes - 1).
  static constexpr size_t kMaxUserFrames = 4096;

  struct Pending {
    Pid pid;
    MonotonicNs time;
    std::vector<bpfprof_hotspot_frame> frames;
  };

  static RuntimeStats& stats(Recording& recording) {
    return recording.stats.runtimes[RuntimeKind::kHotSpot];
  }
  void forget(Pid pid) {
    if (jvms_.erase(pid)) gone_.push_back(pid);
    pending_stacks_.forget(pid);
  }
  void set_up(Pid pid, Jvm& jvm, RuntimeKernelMaps& maps, RuntimeStats& stats);
  // The JVM's threads' Java names, read again with its code cache (threads start and are
  // renamed while it runs); those the kernel cuts at 15 characters are named so.
  static void read_thread_names(Pid pid, Jvm& jvm, Recording& recording);
  const std::vector<RuntimeFrameId>& frame_ids(Jvm& jvm, const bpfprof_hotspot_frame& f,
                                               uint64_t pc, Recording& recording);

  std::unordered_map<Pid, Jvm> jvms_;
  RuntimeProcessTracker tracker_{[](const std::string& base) { return base == "libjvm.so"; }};
  std::vector<Pid> gone_;  // entries to take out of the kernel's map
  PendingStacks<Pending> pending_stacks_;
};

// Reads the JVM's tables and code cache and puts its entry into the kernel's map; a JVM
// still starting is tried again later, one that cannot be read is said in one line.
void HotSpotRuntime::set_up(Pid pid, Jvm& jvm, RuntimeKernelMaps& maps, RuntimeStats& stats) {
  const std::string who = "pid " + std::to_string(pid.value);
  auto give_up = [&](const std::string& reason) {
    jvm.given_up = true;
    if (jvm.memory.gone()) return;  // it exited: its tables were not at fault
    stats.not_read.emplace(who, "java: " + reason + ", frames not read");
  };
  if (!jvm.in_kernel && ++jvm.attempts > kMaxAttempts)
    return give_up("the JVM did not set up its code cache");
  if (!jvm.library) {
    auto library = hotspot::locate_jvm_library(pid);
    if (const auto* error = std::get_if<VmStructsError>(&library)) {
      if (error->failure == hotspot::VmStructsFailure::kNoJvm) return;  // still mapping it
      return give_up(error->message);
    }
    jvm.library = std::get<hotspot::JvmLibrary>(library);
  }
  if (!jvm.namer) {
    const hotspot::VmStructsLimits limits;
    RemoteReader tables(jvm.memory, limits.max_bytes, limits.max_string_bytes);
    const auto structs = hotspot::read_vm_structs(tables, jvm.library->symbols, limits);
    if (const auto* error = std::get_if<VmStructsError>(&structs)) {
      if (error->failure == hotspot::VmStructsFailure::kUnreadable) return;  // still starting
      return give_up(error->message);
    }
    const auto layout = hotspot::hotspot_layout(std::get<VmStructs>(structs));
    if (const auto* missing = std::get_if<LayoutMissing>(&layout)) return give_up(missing->reason);
    jvm.layout = std::get<HotSpotLayout>(layout);
    jvm.namer = std::make_unique<JavaFrameNamer>(jvm.memory, jvm.layout);
  }
  RemoteReader reader(jvm.memory, 1 << 16, 256);
  const auto entry = hotspot::read_code_cache(reader, jvm.layout);
  if (const auto* error = std::get_if<CodeCacheError>(&entry)) {
    if (!error->not_ready) give_up(error->reason);
    return;
  }
  const auto& value = std::get<bpfprof_hotspot_process>(entry);
  if (jvm.in_kernel && memcmp(&*jvm.in_kernel, &value, sizeof(value)) == 0) return;
  if (!maps.put(kMap, pid, &value, sizeof(value)))
    return give_up("the kernel's table of JVMs is full");
  if (!jvm.in_kernel) ++stats.interpreters;
  jvm.in_kernel = value;
}

void HotSpotRuntime::read_thread_names(Pid pid, Jvm& jvm, Recording& recording) {
  if (!jvm.layout.thread_names) return;
  if (!jvm.thread_names) jvm.thread_names = std::make_unique<hotspot::JavaThreadNames>(jvm.layout);
  RemoteReader reader(jvm.memory, 1 << 20, 256);
  for (hotspot::JavaThreadName& thread : jvm.thread_names->read(reader))
    hotspot::keep_java_thread_name(recording.runtime_thread_names[{pid.value, thread.tid}],
                                   std::move(thread.name));
}

void HotSpotRuntime::take_event(const void* data, size_t size, Recording& recording) {
  bpfprof_hotspot_stack_event e;
  const std::optional<size_t> count =
      copy_frame_event(data, size, e, &bpfprof_hotspot_stack_event::count);
  if (!count) return;
  RuntimeStats& s = stats(recording);
  count_frame_event(s, size, BPFPROF_MAX_HOTSPOT_FRAMES);
  if (e.dropped) ++s.at_limit;
  pending_stacks_.put(e.header).frames.assign(e.frames, e.frames + *count);
}

// Each noted Java frame replaces the raw address at its index, if that is still the pc the
// walk noted (the stack event is the one the frames were sent for).
void HotSpotRuntime::merge_into(Pid pid, Tid tid, MonotonicNs time, std::vector<uint64_t>& user,
                                Recording& recording) {
  std::optional<Pending> pending = pending_stacks_.take(pid, tid, time);
  auto jvm = jvms_.find(pid);
  if (!pending || jvm == jvms_.end() || !jvm->second.namer) return;
  bool merged = false;
  // Outermost first, so that the frames inlined methods add do not move those still to do.
  std::sort(pending->frames.begin(), pending->frames.end(),
            [](const auto& a, const auto& b) { return a.depth > b.depth; });
  for (const bpfprof_hotspot_frame& f : pending->frames) {
    if (f.depth >= user.size() || static_cast<uint32_t>(user[f.depth]) != f.pc_low) {
      ++stats(recording).mismatched;
      continue;
    }
    const std::vector<RuntimeFrameId>& ids = frame_ids(jvm->second, f, user[f.depth], recording);
    user[f.depth] = raw_runtime_frame(ids.front());
    for (size_t i = 1; i < ids.size() && user.size() < kMaxUserFrames; ++i)
      user.insert(user.begin() + f.depth + i, raw_runtime_frame(ids[i]));
    merged = true;
  }
  if (merged) ++stats(recording).merged;
}

const std::vector<RuntimeFrameId>& HotSpotRuntime::frame_ids(Jvm& jvm,
                                                             const bpfprof_hotspot_frame& f,
                                                             uint64_t pc, Recording& recording) {
  // A stub's name does not depend on its pc; a method's line and inlined methods do.
  const bool stub = f.kind == BPFPROF_HOTSPOT_FRAME_STUB;
  const NotedFrame key{f.method, f.aux, stub ? 0 : f.pc_low, f.kind, !stub && f.depth == 0};
  if (auto it = jvm.frames.find(key); it != jvm.frames.end()) return it->second;
  RuntimeStats& s = stats(recording);
  const auto start = std::chrono::steady_clock::now();
  const uint64_t reads_before = jvm.namer->methods_read();
  const auto names = jvm.namer->name(f, pc);
  s.code_objects_read += jvm.namer->methods_read() - reads_before;
  s.code_read_ns += static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start)
          .count());
  std::vector<RuntimeFrameId> ids;
  for (const auto& name : names)
    ids.push_back(
        recording.runtime_frames.intern({name.name, "", 0, RuntimeKind::kHotSpot}, name.line));
  if (ids.empty()) {
    ++s.unnamed_frames;
    ids.push_back(recording.runtime_frames.intern(kUnnamedJava, 0));
  } else {
    ++s.frames;
  }
  if (jvm.frames.size() >= JavaFrameNamer::kMaxCached) jvm.frames.clear();
  return jvm.frames.emplace(key, std::move(ids)).first->second;
}

}  // namespace

std::unique_ptr<Runtime> make_hotspot_runtime() { return std::make_unique<HotSpotRuntime>(); }

}  // namespace bpfprof
