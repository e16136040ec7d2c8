#include "runtimes/golabels/runtime.h"

#include <algorithm>
#include <map>
#include <string>
#include <unordered_set>
#include <utility>

#include "runtimes/golabels/processes.h"
#include "runtimes/kit/pending_stacks.h"
#include "runtimes/kit/split_runtime.h"

namespace bpfprof {
namespace {

// The part of a string the event holds, marked where it was cut.
std::string bounded_text(const char* bytes, uint32_t length, size_t capacity) {
  std::string text(bytes, std::min<size_t>(length, capacity));
  if (length > capacity) text += "\u2026";
  return text;
}

struct PendingLabels {
  Pid pid;
  MonotonicNs time;
  std::optional<uint64_t> set;  // g.labels of a set in sets_
};

// The label sets each thread's events sent, until the stack they were sent for.
class GoLabelsStacks {
 public:
  explicit GoLabelsStacks(const GoLabelsProcesses& processes) : processes_(processes) {}

  void take_event(const void* data, size_t size, RuntimeStats& stats);
  bool has_frames_for(Tid tid) const { return pending_.contains(tid); }
  void merge_into(Pid pid, Tid tid, MonotonicNs time, std::vector<uint64_t>& user,
                  Recording& recording);
  void forget(Pid pid) {
    std::erase_if(sets_, [&](const auto& entry) { return entry.first.first == pid; });
    with_labels_.erase(pid);
    pending_.forget(pid);
  }

 private:
  struct Set {
    LabelSet labels;
    std::optional<RuntimeFrameId> frame;  // interned at its first stack
  };

  const GoLabelsProcesses& processes_;
  std::unordered_set<Pid> with_labels_;
  PendingStacks<PendingLabels> pending_;
  // Each set sent whole, by process and g.labels: the BPF side sends a set it sent less than a
  // second ago by its address alone.
  std::map<std::pair<Pid, uint64_t>, Set> sets_;
};

void GoLabelsStacks::take_event(const void* data, size_t size, RuntimeStats& stats) {
  bpfprof_golabels_stack_event e;
  const std::optional<size_t> count =
      copy_frame_event(data, size, e, &bpfprof_golabels_stack_event::count);
  if (!count) return;
  count_frame_event(stats, size, BPFPROF_MAX_GO_LABELS);
  PendingLabels& pending = pending_.put(e.header);
  pending.set.reset();
  if (!processes_.find(pending.pid)) return;
  if (with_labels_.insert(pending.pid).second) ++stats.interpreters;
  const std::pair key{pending.pid, e.set};
  switch (e.status) {
    case BPFPROF_GO_LABELS_KNOWN:
      if (sets_.contains(key)) pending.set = e.set;
      return;
    case BPFPROF_GO_LABELS_TOO_MANY:
      ++stats.at_limit;
      if (*count == 0) return;  // a map of several buckets: none read, no set to show
      [[fallthrough]];
    case BPFPROF_GO_LABELS_READ:
      sets_[key] = Set{label_set_of(e, *count), std::nullopt};
      pending.set = e.set;
      return;
    default:
      ++stats.unreadable;
      return;
  }
}

void GoLabelsStacks::merge_into(Pid pid, Tid tid, MonotonicNs time, std::vector<uint64_t>& user,
                                Recording& recording) {
  const std::optional<PendingLabels> taken = pending_.take(pid, tid, time);
  if (!taken || !taken->set) return;
  auto found = sets_.find({pid, *taken->set});
  if (found == sets_.end()) return;
  Set& set = found->second;
  if (!set.frame)
    set.frame = recording.runtime_frames.intern(
        RuntimeFunction{label_frame_name(set.labels), "", 0, RuntimeKind::kGoLabels}, 0);
  user.push_back(raw_runtime_frame(*set.frame));  // the outermost frame
  ++recording.stats.runtimes[RuntimeKind::kGoLabels].merged;
}

class GoLabelsRuntime final : public SplitRuntime<GoLabelsProcesses, GoLabelsStacks> {
 public:
  GoLabelsRuntime() : SplitRuntime(RuntimeKind::kGoLabels, "go_labels_processes") {}
  void apply_kernel_changes(RuntimeKernelMaps& maps, Recording& recording) override {
    apply(maps, processes_.take_changes(), recording);
  }
};

}  // namespace

LabelSet label_set_of(const bpfprof_golabels_stack_event& event, size_t count) {
  LabelSet labels;
  for (size_t i = 0; i < std::min<size_t>(count, BPFPROF_MAX_GO_LABELS); ++i) {
    const bpfprof_go_label& l = event.frames[i];
    labels.emplace_back(bounded_text(l.key, l.key_length, sizeof(l.key)),
                        bounded_text(l.value, l.value_length, sizeof(l.value)));
  }
  std::sort(labels.begin(), labels.end());
  return labels;
}

std::unique_ptr<Runtime> make_golabels_runtime() { return std::make_unique<GoLabelsRuntime>(); }

}  // namespace bpfprof
