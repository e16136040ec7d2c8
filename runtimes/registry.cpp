#include "runtimes/registry.h"

#include <algorithm>

#include "bpf/events.h"
#include "bpf/runtime_list.h"

#include "runtimes/beam/runtime.h"
#include "runtimes/golabels/runtime.h"
#include "runtimes/hotspot/runtime.h"
#include "runtimes/perl/runtime.h"
#include "runtimes/php/runtime.h"
#include "runtimes/python/runtime.h"
#include "runtimes/ruby/runtime.h"
#include "runtimes/v8/runtime.h"

namespace bpfprof {

Runtimes::Runtimes(const std::set<RuntimeKind>& disabled) {
  if (!disabled.contains(RuntimeKind::kPython)) runtimes_.push_back(make_python_runtime());
  if (!disabled.contains(RuntimeKind::kHotSpot)) runtimes_.push_back(make_hotspot_runtime());
  if (!disabled.contains(RuntimeKind::kRuby)) runtimes_.push_back(make_ruby_runtime());
  if (!disabled.contains(RuntimeKind::kV8)) runtimes_.push_back(make_v8_runtime());
  if (!disabled.contains(RuntimeKind::kPhp)) runtimes_.push_back(make_php_runtime());
  if (!disabled.contains(RuntimeKind::kBeam)) runtimes_.push_back(make_beam_runtime());
  if (!disabled.contains(RuntimeKind::kPerl)) runtimes_.push_back(make_perl_runtime());
  // Last: its frame goes at the root of the stack the others merged into.
  if (!disabled.contains(RuntimeKind::kGoLabels)) runtimes_.push_back(make_golabels_runtime());
}

Runtimes::~Runtimes() = default;

void Runtimes::observe(const std::vector<LifecycleEvent>& events, size_t from,
                       Recording& recording) {
  for (auto& runtime : runtimes_) runtime->observe(events, from, recording);
}

void Runtimes::forget_exited() {
  for (auto& runtime : runtimes_) runtime->forget_exited();
}

namespace {

// Whether the walkers that sampling a command starts with leave the runtime's reader out
// (bpf/runtime_list.h, BPFPROF_RUNTIMES_READ_LATER).
bool is_read_later(RuntimeKind kind) {
#define BPFPROF_IS_KIND(ID) || kind == static_cast<RuntimeKind>(BPFPROF_RUNTIME_##ID)
  return false BPFPROF_RUNTIMES_READ_LATER(BPFPROF_IS_KIND);
#undef BPFPROF_IS_KIND
}

}  // namespace

void Runtimes::apply_kernel_changes(RuntimeKernelMaps& maps, Recording& recording,
                                    bool late_readers_loaded) {
  for (auto& runtime : runtimes_)
    if (late_readers_loaded || !is_read_later(runtime->kind()))
      runtime->apply_kernel_changes(maps, recording);
}

bool Runtimes::setting_up() const {
  return std::any_of(runtimes_.begin(), runtimes_.end(),
                     [](const auto& runtime) { return runtime->setting_up(); });
}

bool Runtimes::take_event(uint32_t kind, const void* data, size_t size, Recording& recording) {
  for (auto& runtime : runtimes_) {
    if (runtime->event_kind() != kind) continue;
    runtime->take_event(data, size, recording);
    return true;
  }
  return false;
}

void Runtimes::merge_into(Pid pid, Tid tid, MonotonicNs time, std::vector<uint64_t>& user,
                          Recording& recording) {
  for (auto& runtime : runtimes_) runtime->merge_into(pid, tid, time, user, recording);
}

}  // namespace bpfprof
