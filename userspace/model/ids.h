// Distinct types for distinct ids, so a thread id cannot be passed where a process id is
// meant, and an index into one table cannot be used for another.
#pragma once

#include <compare>
#include <cstdint>
#include <functional>

namespace bpfprof {

template <typename Tag, typename Rep>
struct StrongId {
  using rep_type = Rep;
  Rep value{};

  constexpr StrongId() = default;
  constexpr explicit StrongId(Rep v) : value(v) {}
  constexpr auto operator<=>(const StrongId&) const = default;
};

using Pid = StrongId<struct PidTag, int32_t>;
using Tid = StrongId<struct TidTag, int32_t>;
using Cpu = StrongId<struct CpuTag, uint32_t>;

// CLOCK_MONOTONIC nanoseconds: the one clock of BPF events and perf side-band records.
using MonotonicNs = StrongId<struct MonotonicNsTag, uint64_t>;
// A thread's CPU time (the kernel's per-task sum_exec_runtime), nanoseconds.
using CpuTimeNs = StrongId<struct CpuTimeNsTag, uint64_t>;

// Indices into the model's tables of process entries, thread entries and libraries.
using ProcessIndex = StrongId<struct ProcessIndexTag, uint32_t>;
using ThreadIndex = StrongId<struct ThreadIndexTag, uint32_t>;
using LibId = StrongId<struct LibIdTag, int32_t>;

}  // namespace bpfprof

template <typename Tag, typename Rep>
struct std::hash<bpfprof::StrongId<Tag, Rep>> {
  size_t operator()(const bpfprof::StrongId<Tag, Rep>& id) const noexcept {
    return std::hash<Rep>{}(id.value);
  }
};
