// A thread's `nativeAllocations`: where the thread brought memory in (record --memory, its
// page-fault samples: the unbalanced form, as a page fault says where memory was touched, not
// when it goes), or allocated and freed blocks (record --allocations: the balanced form, each
// row with its block's address, frees negative). Each row has its time, stack and bytes. The
// front end's call tree then offers "Native Allocations" (and with frees, retained memory)
// beside the samples.
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
    int64_t bytes;                    // a block freed: negative
    uint64_t address;                 // record --allocations' blocks only
    std::optional<Tid> by_thread;     // freed by another thread than the table's
  };
  AllocationsTable() = default;
  // As SamplesTable: the model's allocations must outlive the table.
  AllocationsTable(const std::vector<ThreadAllocation>& allocations,
                   std::shared_ptr<const std::vector<StackIndex>> output_stack_of, MonotonicNs zero)
      : allocations_(&allocations), output_stack_of_(std::move(output_stack_of)), zero_(zero) {}

  size_t size() const { return allocations_ ? allocations_->size() : 0; }
  Allocation row(size_t i) const;
  // The model's rows, as the table reads them.
  const std::vector<ThreadAllocation>* rows() const { return allocations_; }
  // Writes the `nativeAllocations` key and table of thread `tid` (each row's threadId is `tid`
  // but for a free by another thread); nothing when no row has a stack.
  void write_json(JsonWriter& w, Tid tid) const;

 private:
  const std::vector<ThreadAllocation>* allocations_ = nullptr;
  std::shared_ptr<const std::vector<StackIndex>> output_stack_of_;
  MonotonicNs zero_{0};
};

// record --allocations: for each list of rows (a thread's, with its process), whether each row
// is a block still held at the end: allocated, and freed by no later row of its process.
using ProcessRows = std::pair<Pid, const std::vector<ThreadAllocation>*>;
std::vector<std::vector<bool>> blocks_held(const std::vector<ProcessRows>& lists);

}  // namespace bpfprof
