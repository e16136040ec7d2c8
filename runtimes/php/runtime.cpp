#include "runtimes/php/runtime.h"

#include <map>
#include <optional>
#include <tuple>
#include <unordered_set>
#include <vector>

#include "runtimes/kit/merge.h"
#include "runtimes/kit/pending_stacks.h"
#include "runtimes/kit/remote_memory.h"
#include "runtimes/kit/split_runtime.h"
#include "runtimes/php/events.h"
#include "runtimes/php/names.h"
#include "runtimes/php/processes.h"

namespace bpfprof {
namespace {

const RuntimeFunction kPhpUnreadFunction{"[unknown PHP function]", "", 0, RuntimeKind::kPhp};
const RuntimeFunction kPhpDeeperFrames{
    "[unknown PHP frames: more than " + std::to_string(BPFPROF_MAX_PHP_FRAMES) + " deep]", "", 0,
    RuntimeKind::kPhp};
const RuntimeFunction kPhpUnreadableFrames{"[unknown PHP frames: unreadable frame]", "", 0,
                                           RuntimeKind::kPhp};

// What naming one process's functions may read: in all, and strings are bounded (names.h).
constexpr uint64_t kPhpProcessBudgetBytes = 64ull << 20;
// Functions named and kept. Without opcache php-fpm compiles each request's functions anew, at
// new addresses: past this many, the names are read again as they come.
constexpr size_t kMaxKeptPhpFunctions = size_t{1} << 16;

struct PendingPhp {
  Pid pid;
  MonotonicNs time;
  std::vector<bpfprof_php_frame> frames;
  uint32_t status = BPFPROF_PHP_STACK_COMPLETE;
};

class PhpStacks {
 public:
  explicit PhpStacks(const PhpProcesses& processes) : processes_(processes) {}

  void take_event(const void* data, size_t size, RuntimeStats& stats);
  bool has_frames_for(Tid tid) const { return pending_.contains(tid); }
  void merge_into(Pid pid, Tid tid, MonotonicNs time, std::vector<uint64_t>& user,
                  Recording& recording);
  void forget(Pid pid) {
    std::erase_if(functions_, [&](const auto& entry) { return std::get<0>(entry.first) == pid; });
    bytes_read_.erase(pid);
    with_frames_.erase(pid);
    pending_.forget(pid);
  }

 private:
  // name, scope, filename, first line: what names a function (closures of one source share it)
  using FunctionKey = std::tuple<Pid, uint64_t, uint64_t, uint64_t, uint32_t>;
  const RuntimeFunction& function_of(Pid pid, const PhpInterpreter& interpreter,
                                     const bpfprof_php_frame& frame, RuntimeStats& stats);

  const PhpProcesses& processes_;
  PendingStacks<PendingPhp> pending_;
  std::unordered_set<Pid> with_frames_;
  std::map<FunctionKey, std::optional<RuntimeFunction>> functions_;  // nullopt: unreadable
  std::map<Pid, uint64_t> bytes_read_;
  std::vector<ActivationFrame> scratch_;
};

void PhpStacks::take_event(const void* data, size_t size, RuntimeStats& stats) {
  bpfprof_php_stack_event e;
  const std::optional<size_t> depth =
      copy_frame_event(data, size, e, &bpfprof_php_stack_event::depth);
  if (!depth) return;
  count_frame_event(stats, size, BPFPROF_MAX_PHP_FRAMES);
  if (e.status == BPFPROF_PHP_STACK_IDLE) ++stats.no_thread_state;
  if (e.status == BPFPROF_PHP_STACK_UNREADABLE) ++stats.unreadable;
  if (e.status == BPFPROF_PHP_STACK_AT_LIMIT) ++stats.at_limit;
  PendingPhp& pending = pending_.put(e.header);
  if (with_frames_.insert(pending.pid).second) ++stats.interpreters;
  pending.status = e.status;
  pending.frames.assign(e.frames, e.frames + *depth);
}

const RuntimeFunction& PhpStacks::function_of(Pid pid, const PhpInterpreter& interpreter,
                                              const bpfprof_php_frame& frame, RuntimeStats& stats) {
  if (functions_.size() >= kMaxKeptPhpFunctions) functions_.clear();
  auto [it, inserted] = functions_.try_emplace(
      FunctionKey{pid, frame.name, frame.scope, frame.filename, frame.line_start});
  if (inserted) {
    uint64_t& used = bytes_read_[pid];
    ProcessMemory memory(pid);
    RemoteReader reader(memory, kPhpProcessBudgetBytes - std::min(used, kPhpProcessBudgetBytes), 0);
    it->second = read_php_function(reader, *interpreter.layout, frame);
    used += reader.bytes_read();
    ++stats.code_objects_read;
  }
  if (!it->second) {
    ++stats.unnamed_frames;
    return kPhpUnreadFunction;
  }
  ++stats.frames;
  return *it->second;
}

void PhpStacks::merge_into(Pid pid, Tid tid, MonotonicNs time, std::vector<uint64_t>& user,
                           Recording& recording) {
  const std::optional<PendingPhp> taken = pending_.take(pid, tid, time);
  const PhpInterpreter* interpreter = processes_.find(pid);
  if (!taken || !interpreter || taken->frames.empty()) return;
  RuntimeStats& stats = recording.stats.runtimes[RuntimeKind::kPhp];
  scratch_.clear();
  for (const bpfprof_php_frame& f : taken->frames) {
    const RuntimeFunction& function = function_of(pid, *interpreter, f, stats);
    scratch_.push_back({raw_runtime_frame(recording.runtime_frames.intern(function, f.lineno)),
                        (f.call_info & kPhpCallTop) != 0});
  }
  const bool cut =
      taken->status == BPFPROF_PHP_STACK_AT_LIMIT || taken->status == BPFPROF_PHP_STACK_UNREADABLE;
  if (cut) {
    scratch_.back().entry = false;
    const RuntimeFunction& rest =
        taken->status == BPFPROF_PHP_STACK_AT_LIMIT ? kPhpDeeperFrames : kPhpUnreadableFrames;
    scratch_.push_back({raw_runtime_frame(recording.runtime_frames.intern(rest, 0)), true});
  }
  auto runs_vm_loop = [&](uint64_t pc) { return interpreter->runs_vm_loop(pc); };
  MergedStack merged =
      merge_runtime_frames(user, scratch_, runs_vm_loop,
                           cut ? ActivationMatch::kFromInnermost : ActivationMatch::kFromOutermost);
  if (merged.mismatched) ++stats.mismatched;
  if (merged.runtime_frames > 0) ++stats.merged;
  user = std::move(merged.frames);
}

class PhpRuntime final : public SplitRuntime<PhpProcesses, PhpStacks> {
 public:
  PhpRuntime() : SplitRuntime(RuntimeKind::kPhp, "php_processes") {}
  void apply_kernel_changes(RuntimeKernelMaps& maps, Recording& recording) override {
    apply(maps, processes_.take_changes(), recording);
  }
};

}  // namespace

std::unique_ptr<Runtime> make_php_runtime() { return std::make_unique<PhpRuntime>(); }

}  // namespace bpfprof
