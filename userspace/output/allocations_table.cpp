#include "userspace/output/allocations_table.h"

#include <string_view>

namespace bpfprof {

AllocationsTable::Allocation AllocationsTable::row(size_t i) const {
  const ThreadAllocation& a = (*allocations_)[i];
  return {output_stack(*output_stack_of_, a.stack), profile_time_ms(zero_, a.time), a.bytes};
}

void AllocationsTable::write_json(JsonWriter& w) const {
  // The front end's call tree takes a stack index in each row: rows without one are left out.
  std::vector<Allocation> rows;
  for (size_t i = 0; i < size(); ++i)
    if (Allocation a = row(i); a.stack) rows.push_back(a);
  if (rows.empty()) return;
  w.key("nativeAllocations");
  w.begin_object();
  auto column = [&](std::string_view name, auto value) {
    w.key(name);
    w.begin_array();
    for (const Allocation& a : rows) value(a);
    w.end_array();
  };
  column("time", [&](const Allocation& a) { w.number(a.time_ms); });
  column("stack", [&](const Allocation& a) { w.number(uint64_t{a.stack->value}); });
  column("weight", [&](const Allocation& a) { w.number(a.bytes); });
  w.field("weightType", "bytes");
  w.key("length");
  w.number(uint64_t{rows.size()});
  w.end_object();
}

}  // namespace bpfprof
