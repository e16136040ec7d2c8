// Raw stacks (addresses) resolved to frames (a library and file offset, kernel code, a
// runtime's function) in a process's address space, each raw stack once for as long as that
// address space is unchanged.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "userspace/model/address_spaces.h"
#include "userspace/model/frame_key.h"
#include "userspace/model/ids.h"
#include "userspace/model/recording.h"

namespace bpfprof {

class StackResolver {
 public:
  // The stack `raw` of process `pid` (its mappings `space`, null if not known) in `stacks`.
  StackId resolve(Pid pid, const AddressSpace* space, RawStackId raw,
                  const RawStackTree& raw_stacks, ResolvedStackTree& stacks);
  // Forgets what was resolved: its keys are raw stacks, its values nodes of `stacks`, and a
  // compaction renumbers both.
  void clear() {
    resolved_.clear();
    resolved_callers_.clear();
  }

 private:
  StackId resolve_uncached(Pid pid, const AddressSpace* space, RawStackId raw,
                           const RawStackTree& raw_stacks, ResolvedStackTree& stacks);

  // Raw stacks already resolved in a process, with the address-space version they used.
  struct ResolvedStack {
    uint64_t address_space_version;
    StackId stack;
  };
  std::unordered_map<uint64_t, ResolvedStack> resolved_;  // by pid << 32 | raw stack
  // The same for raw stacks as the callers of others (their frames all return addresses):
  // the leaves of a loop differ from sample to sample, their callers do not.
  std::unordered_map<uint64_t, ResolvedStack> resolved_callers_;
  std::vector<uint64_t> scratch_exact_;  // resolve_uncached's, kept for their capacity
  std::vector<RawStackId> scratch_callers_;
};

}  // namespace bpfprof
