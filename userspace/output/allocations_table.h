// A thread's `nativeAllocations` (record --memory): where the thread brought memory in, from
// its page-fault samples, each row its time, stack and bytes. The front
// end's call tree then offers "Native Allocations" beside the samples. No row is freed: a
// page fault says where memory was touched, not when it goes (the unbalanced form).
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "userspace/model/clocks.h"
#include "userspace/model/session_model.h"
#include "userspace/output/json_writer.h"
#include "userspace/output/profile_tables.h"

namespace bpfprof {

class AllocationsTable {
 public:
  struct Allocation {
    std::optional<StackIndex> stack;  // none: the empty stack
    double time_ms;                   // since meta.startTime
    uint64_t bytes;
  };
  AllocationsTable() = default;
  // As SamplesTable: the model's allocations must outlive the table.
  AllocationsTable(const std::vector<ThreadAllocation>& allocations,
                   std::shared_ptr<const std::vector<StackIndex>> output_stack_of, MonotonicNs zero)
      : allocations_(&allocations), output_stack_of_(std::move(output_stack_of)), zero_(zero) {}

  size_t size() const { return allocations_ ? allocations_->size() : 0; }
  Allocation row(size_t i) const;
  // Writes the `nativeAllocations` key and table; nothing when no row has a stack.
  void write_json(JsonWriter& w) const;

 private:
  const std::vector<ThreadAllocation>* allocations_ = nullptr;
  std::shared_ptr<const std::vector<StackIndex>> output_stack_of_;
  MonotonicNs zero_{0};
};

}  // namespace bpfprof
