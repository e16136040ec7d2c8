#include "runtimes/ruby/runtime.h"

#include <chrono>
#include <cstring>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "runtimes/kit/merge.h"
#include "runtimes/kit/pending_stacks.h"
#include "runtimes/kit/remote_memory.h"
#include "runtimes/ruby/events.h"
#include "runtimes/ruby/iseqs.h"
#include "runtimes/ruby/processes.h"

namespace bpfprof {
namespace {

const RuntimeFunction kRubyUnknownCode{"[unknown Ruby code]", "", 0, RuntimeKind::kRuby};
const RuntimeFunction kRubyUnreadCode{"[unknown Ruby code: read budget used up]", "", 0,
                                      RuntimeKind::kRuby};
const RuntimeFunction kRubyDeeperFrames{
    "[unknown Ruby frames: more than " + std::to_string(BPFPROF_MAX_RUBY_FRAMES) + " deep]", "", 0,
    RuntimeKind::kRuby};
const RuntimeFunction kRubyUnreadableFrames{"[unknown Ruby frames: unreadable frame]", "", 0,
                                            RuntimeKind::kRuby};

// ep[0]'s flags (vm_core.h): C frames (cfuncs, C blocks) run no iseq; the dummy frame at the
// bottom of every thread's stack belongs to no call of the VM loop.
constexpr uint32_t kFrameFlagCFrame = 0x0080;
constexpr uint32_t kFrameMagicDummy = 0x79990001;

// What reading a process's iseqs may cost: bytes in all, per iseq, and iseqs kept.
constexpr uint64_t kProcessBudgetBytes = 256ull << 20;
constexpr uint64_t kIseqBudgetBytes = 4ull << 20;
constexpr size_t kMaxIseqsPerProcess = 1u << 18;

struct PendingFrame {
  uint64_t iseq;  // a C method's frame: its method entry
  uint64_t pc;
  bool entry;
  bool cfunc;
};
struct Pending {
  Pid pid;
  MonotonicNs time;
  std::vector<PendingFrame> frames;
  uint32_t status;
};

// Ruby names the native thread after Thread#name too, cut to the kernel's 15 bytes: the name
// is read in full from rb_thread_t now and then (a thread may be named after it starts).
struct ThreadName {
  Pid pid;
  uint64_t thread = 0;
  MonotonicNs read_at;
  std::string name;
};
constexpr uint64_t kThreadNameEveryNs = 1'000'000'000;
constexpr size_t kMaxThreadName = 256;

struct ProcessIseqs {
  // By address (nullopt: unreadable), iseqs and C methods' entries apart: a required file's
  // top-level iseq is freed after its load and its heap slot may hold a method entry next
  // (work.rb's SHA256 update was named "<top (required)>" for a whole run).
  std::unordered_map<uint64_t, std::optional<RubyIseq>> iseqs;
  std::unordered_map<uint64_t, std::optional<RubyIseq>> c_methods;
  uint64_t bytes_read = 0;
  bool over_budget = false;  // counted once in the summary
};

class RubyRuntime final : public Runtime {
 public:
  RuntimeKind kind() const override { return RuntimeKind::kRuby; }

  void observe(const std::vector<LifecycleEvent>& events, size_t from,
               Recording& recording) override {
    processes_.observe(events, from, stats(recording));
  }

  void forget_exited() override {
    for (Pid pid : processes_.forget_exited()) {
      iseqs_.erase(pid);
      with_frames_.erase(pid);
      std::erase_if(thread_names_, [&](const auto& entry) { return entry.second.pid == pid; });
      pending_.forget(pid);
    }
  }

  void apply_kernel_changes(RuntimeKernelMaps& maps, Recording& recording) override {
    apply_process_changes(maps, kMap, kind(), processes_.take_changes(), in_kernel_,
                          stats(recording));
  }

  void take_event(const void* data, size_t size, Recording& recording) override;
  void merge_into(Pid pid, Tid tid, MonotonicNs time, std::vector<uint64_t>& user,
                  Recording& recording) override;

 private:
  static constexpr const char* kMap = "ruby_processes";
  static RuntimeStats& stats(Recording& recording) {
    return recording.stats.runtimes[RuntimeKind::kRuby];
  }
  const RubyIseq* iseq(Pid pid, const RubyInterpreter& interpreter, const PendingFrame& frame,
                       RuntimeStats& stats);
  RuntimeFrameId name_frame(Pid pid, const RubyInterpreter& interpreter, const PendingFrame& f,
                            Recording& recording);
  void name_thread(const RubyInterpreter& interpreter, const Pending& pending, Tid tid,
                   uint64_t thread, Recording& recording);

  RubyProcesses processes_;
  std::unordered_set<Pid> in_kernel_;
  std::unordered_set<Pid> with_frames_;
  PendingStacks<Pending> pending_;
  std::unordered_map<Tid, ThreadName> thread_names_;
  std::unordered_map<Pid, ProcessIseqs> iseqs_;
  std::vector<ActivationFrame> scratch_;
};

void RubyRuntime::take_event(const void* data, size_t size, Recording& recording) {
  bpfprof_ruby_stack_event e;
  const std::optional<size_t> depth =
      copy_frame_event(data, size, e, &bpfprof_ruby_stack_event::depth);
  if (!depth) return;
  RuntimeStats& s = stats(recording);
  count_frame_event(s, size, BPFPROF_MAX_RUBY_FRAMES);
  if (e.status == BPFPROF_RUBY_STACK_NO_THREAD) ++s.no_thread_state;
  if (e.status == BPFPROF_RUBY_STACK_UNREADABLE) ++s.unreadable;
  if (e.status == BPFPROF_RUBY_STACK_AT_LIMIT) ++s.at_limit;
  Pending& pending = pending_.put(e.header);
  if (with_frames_.insert(pending.pid).second) ++s.interpreters;
  pending.status = e.status;
  pending.frames.clear();
  const RubyInterpreter* interpreter = processes_.find(pending.pid);
  if (!interpreter) return;
  if (e.thread)
    name_thread(*interpreter, pending, Tid{static_cast<int32_t>(e.header.tid)}, e.thread,
                recording);
  const RubyLayout& l = *interpreter->layout;
  for (size_t i = 0; i < *depth; ++i) {
    const bpfprof_ruby_frame& f = e.frames[i];
    // Frames that run an iseq, and C methods' (as Ruby's backtraces show them); not C blocks
    // (ifuncs) nor the dummy frame at the bottom.
    const bool cfunc = (f.flags & l.frame_magic_mask) == l.frame_magic_cfunc;
    if ((f.flags & kFrameFlagCFrame && !cfunc) ||
        (f.flags & l.frame_magic_mask) == kFrameMagicDummy || !f.iseq)
      continue;
    pending.frames.push_back({f.iseq, f.pc, (f.flags & l.frame_flag_finish) != 0, cfunc});
  }
}

void RubyRuntime::merge_into(Pid pid, Tid tid, MonotonicNs time, std::vector<uint64_t>& user,
                             Recording& recording) {
  const std::optional<Pending> taken = pending_.take(pid, tid, time);
  const RubyInterpreter* interpreter = processes_.find(pid);
  if (!taken || !interpreter || taken->frames.empty()) return;
  const Pending& pending = *taken;
  scratch_.clear();
  for (const PendingFrame& f : pending.frames)
    scratch_.push_back({raw_runtime_frame(name_frame(pid, *interpreter, f, recording)), f.entry});
  if (pending.status == BPFPROF_RUBY_STACK_AT_LIMIT ||
      pending.status == BPFPROF_RUBY_STACK_UNREADABLE) {
    scratch_.back().entry = false;
    const RuntimeFunction& rest =
        pending.status == BPFPROF_RUBY_STACK_AT_LIMIT ? kRubyDeeperFrames : kRubyUnreadableFrames;
    scratch_.push_back({raw_runtime_frame(recording.runtime_frames.intern(rest, 0)), true});
  }
  // A walk cut short has the innermost calls: those are matched from the leaf.
  const bool cut = pending.status == BPFPROF_RUBY_STACK_AT_LIMIT ||
                   pending.status == BPFPROF_RUBY_STACK_UNREADABLE;
  auto runs_vm_loop = [&](uint64_t pc) { return interpreter->runs_vm_loop(pc); };
  MergedStack merged =
      merge_runtime_frames(user, scratch_, runs_vm_loop,
                           cut ? ActivationMatch::kFromInnermost : ActivationMatch::kFromOutermost);
  RuntimeStats& s = stats(recording);
  if (merged.mismatched) ++s.mismatched;
  if (merged.runtime_frames > 0) ++s.merged;
  user = std::move(merged.frames);
}

// A thread whose Thread#name is new gets it as its name from then on (a rename, as the kernel
// reports them, with the name in full).
void RubyRuntime::name_thread(const RubyInterpreter& interpreter, const Pending& pending, Tid tid,
                              uint64_t thread, Recording& recording) {
  ThreadName& known = thread_names_[tid];
  if (known.pid == pending.pid && known.thread == thread &&
      pending.time.value - known.read_at.value < kThreadNameEveryNs)
    return;
  if (known.pid != pending.pid) known = ThreadName{pending.pid, 0, MonotonicNs{}, ""};
  known.thread = thread;
  known.read_at = pending.time;
  ProcessMemory memory(pending.pid);
  RemoteReader reader(memory, 4 * kMaxThreadName, 0);
  const auto value = reader.word(thread + interpreter.layout->thread_name);
  std::optional<std::string> name =
      value ? read_ruby_string(reader, *interpreter.layout, *value, kMaxThreadName) : std::nullopt;
  if (!name || name->empty() || *name == known.name) return;
  known.name = *name;
  recording.events.push_back(
      LifecycleEvent{pending.time, CommEvent{pending.pid, tid, std::move(*name)}});
}

const RubyIseq* RubyRuntime::iseq(Pid pid, const RubyInterpreter& interpreter,
                                  const PendingFrame& frame, RuntimeStats& s) {
  const uint64_t address = frame.iseq;
  ProcessIseqs& process = iseqs_[pid];
  auto& cache = frame.cfunc ? process.c_methods : process.iseqs;
  if (auto it = cache.find(address); it != cache.end()) return it->second ? &*it->second : nullptr;
  if (process.bytes_read >= kProcessBudgetBytes) {
    if (!std::exchange(process.over_budget, true)) ++s.read_budget_used_up;
    return nullptr;
  }
  if (cache.size() >= kMaxIseqsPerProcess) cache.clear();
  const auto start = std::chrono::steady_clock::now();
  ProcessMemory memory(pid);
  RemoteReader reader(memory, kIseqBudgetBytes, 0);
  std::optional<RubyIseq> read;
  if (!frame.cfunc) {
    read = read_ruby_iseq(reader, *interpreter.layout, address);
  } else if (auto name = read_ruby_method_name(reader, *interpreter.layout, address,
                                               interpreter.global_symbols)) {
    read.emplace().label = std::move(*name);  // no file or lines of its own
  }
  process.bytes_read += reader.bytes_read();
  ++s.code_objects_read;
  s.code_read_ns += static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start)
          .count());
  auto& kept = cache[address] = std::move(read);
  return kept ? &*kept : nullptr;
}

// An iseq (or a C method's entry) is read once; a frame's line comes from its pc at each
// sample. An address whose iseq was freed and reused for another iseq is read again only when
// the process's cache is cleared.
RuntimeFrameId RubyRuntime::name_frame(Pid pid, const RubyInterpreter& interpreter,
                                       const PendingFrame& f, Recording& recording) {
  RuntimeStats& s = stats(recording);
  const RubyIseq* read = iseq(pid, interpreter, f, s);
  if (!read) {
    ++s.unnamed_frames;
    return recording.runtime_frames.intern(
        iseqs_[pid].over_budget ? kRubyUnreadCode : kRubyUnknownCode, 0);
  }
  ++s.frames;
  return recording.runtime_frames.intern(
      {read->label, read->path, read->first_line, RuntimeKind::kRuby},
      read->line_at(f.pc).value_or(0));
}

}  // namespace

std::unique_ptr<Runtime> make_ruby_runtime() { return std::make_unique<RubyRuntime>(); }

}  // namespace bpfprof
