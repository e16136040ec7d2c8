#include "userspace/model/stack_resolver.h"

namespace bpfprof {

namespace {

// The frame of a raw address (a return address: the frame points into its call).
FrameKey frame_key(const AddressSpace* space, uint64_t address, bool return_address) {
  if (std::optional<RuntimeFrameId> python = runtime_frame_of(address))
    return FrameKey::runtime(*python);  // a line, not a return address
  if (address == kExecRawFrame) return FrameKey::exec();
  if (return_address && address > 0) address -= 1;
  if (is_kernel_address(address)) return FrameKey::kernel(address);
  if (const Mapping* m = space ? space->find(address) : nullptr)
    return FrameKey::native(m->lib, address - m->start + m->file_offset);
  return FrameKey::unmapped(address);
}

// The key of a raw stack of a process in resolved_ and resolved_callers_.
uint64_t resolved_key(Pid pid, RawStackId raw) {
  return static_cast<uint64_t>(static_cast<uint32_t>(pid.value)) << 32 | raw;
}

}  // namespace

StackId StackResolver::resolve(Pid pid, const AddressSpace* space, RawStackId raw,
                               const RawStackTree& raw_stacks, ResolvedStackTree& stacks) {
  const uint64_t version = space ? space->version() : 0;
  const uint64_t cache_key = resolved_key(pid, raw);
  if (auto it = resolved_.find(cache_key);
      it != resolved_.end() && it->second.address_space_version == version)
    return it->second.stack;
  const StackId resolved = resolve_uncached(pid, space, raw, raw_stacks, stacks);
  resolved_[cache_key] = ResolvedStack{version, resolved};
  return resolved;
}

StackId StackResolver::resolve_uncached(Pid pid, const AddressSpace* space, RawStackId raw,
                                        const RawStackTree& raw_stacks, ResolvedStackTree& stacks) {
  // The innermost user frame is the instruction the thread was at (sampled, or where it
  // entered the kernel), also below kernel frames: it is exact, as the leaf is. Those frames
  // are resolved each time; every frame above them is a return address, resolved once per
  // raw stack ending there.
  std::vector<uint64_t>& exact_part = scratch_exact_;  // leaf first
  exact_part.clear();
  RawStackId n = raw;
  for (; n != RawStackTree::kRoot && is_kernel_address(raw_stacks.node(n).key);
       n = raw_stacks.node(n).parent)
    exact_part.push_back(raw_stacks.node(n).key);
  const bool has_user_frame = n != RawStackTree::kRoot;
  if (has_user_frame) {
    exact_part.push_back(raw_stacks.node(n).key);
    n = raw_stacks.node(n).parent;
  }
  const uint64_t version = space ? space->version() : 0;
  std::vector<RawStackId>& callers = scratch_callers_;  // innermost first
  callers.clear();
  StackId node = ResolvedStackTree::kRoot;
  for (; n != RawStackTree::kRoot; n = raw_stacks.node(n).parent) {
    auto it = resolved_callers_.find(resolved_key(pid, n));
    if (it != resolved_callers_.end() && it->second.address_space_version == version) {
      node = it->second.stack;
      break;
    }
    callers.push_back(n);
  }
  for (size_t i = callers.size(); i-- > 0;) {
    node = stacks.intern(node, frame_key(space, raw_stacks.node(callers[i]).key, true));
    resolved_callers_[resolved_key(pid, callers[i])] = ResolvedStack{version, node};
  }
  for (size_t i = exact_part.size(); i-- > 0;) {
    const bool exact = i == 0 || (has_user_frame && i == exact_part.size() - 1);
    node = stacks.intern(node, frame_key(space, exact_part[i], !exact));
  }
  return node;
}

}  // namespace bpfprof
