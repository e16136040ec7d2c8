#include "userspace/output/allocations_table.h"

#include <algorithm>
#include <map>
#include <string_view>
#include <unordered_map>

namespace bpfprof {

AllocationsTable::Allocation AllocationsTable::row(size_t i) const {
  const ThreadAllocation& a = (*allocations_)[i];
  return {output_stack(*output_stack_of_, a.stack), profile_time_ms(zero_, a.time), a.bytes,
          a.address, a.by_thread};
}

void AllocationsTable::write_json(JsonWriter& w, Tid tid) const {
  // Page faults without a stack are left out (they say nothing); a block without one stays,
  // with a null stack, so that its free still matches it.
  std::vector<Allocation> rows;
  for (size_t i = 0; i < size(); ++i)
    if (Allocation a = row(i); a.stack || a.address) rows.push_back(a);
  if (std::none_of(rows.begin(), rows.end(), [](const Allocation& a) { return a.stack; })) return;
  w.key("nativeAllocations");
  w.begin_object();
  auto column = [&](std::string_view name, auto value) {
    w.key(name);
    w.begin_array();
    for (const Allocation& a : rows) value(a);
    w.end_array();
  };
  column("time", [&](const Allocation& a) { w.number(a.time_ms); });
  column("stack", [&](const Allocation& a) {
    if (a.stack)
      w.number(uint64_t{a.stack->value});
    else
      w.null();
  });
  column("weight", [&](const Allocation& a) { w.number(a.bytes); });
  // Blocks with addresses: the balanced form, whose frees the front end matches by address.
  if (std::any_of(rows.begin(), rows.end(), [](const Allocation& a) { return a.address; })) {
    column("memoryAddress", [&](const Allocation& a) { w.number(a.address); });
    column("threadId",
           [&](const Allocation& a) { w.number(int64_t{a.by_thread.value_or(tid).value}); });
  }
  w.field("weightType", "bytes");
  w.key("length");
  w.number(uint64_t{rows.size()});
  w.end_object();
}

std::vector<std::vector<bool>> blocks_held(const std::vector<ProcessRows>& lists) {
  struct Row {
    MonotonicNs time;
    uint32_t list;
    uint32_t row;
  };
  std::vector<std::vector<bool>> held(lists.size());
  std::map<int32_t, std::vector<Row>> by_process;
  for (uint32_t l = 0; l < lists.size(); ++l) {
    const std::vector<ThreadAllocation>& rows = *lists[l].second;
    held[l].assign(rows.size(), false);
    for (uint32_t r = 0; r < rows.size(); ++r)
      if (rows[r].address) by_process[lists[l].first.value].push_back({rows[r].time, l, r});
  }
  for (auto& [pid, rows] : by_process) {
    std::stable_sort(rows.begin(), rows.end(),
                     [](const Row& a, const Row& b) { return a.time < b.time; });
    std::unordered_map<uint64_t, Row> live;  // by address
    for (const Row& r : rows) {
      const ThreadAllocation& a = (*lists[r.list].second)[r.row];
      if (a.bytes > 0)
        live[a.address] = r;
      else
        live.erase(a.address);
    }
    for (const auto& [address, r] : live) held[r.list][r.row] = true;
  }
  return held;
}

}  // namespace bpfprof
