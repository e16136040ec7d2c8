// Where --allocations probes the C allocator. A uprobe on an instruction the kernel cannot
// emulate (most but push, nop, jmp and call) single-steps it out of line, a second trap: on
// this machine kind 20 us a call, against 1.6 us for malloc's first instruction, a push.
// glibc's free begins with its NULL check (test rdi,rdi; je): the probe goes on the push after
// it, where rdi still holds the pointer and free(NULL) never comes.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace bpfprof {

// The offset into a function whose first bytes are `code` of the first instruction after a
// leading `test rdi,rdi; je` when that instruction is a push of a register; 0 otherwise.
uint64_t offset_past_null_check(std::span<const uint8_t> code);

// offset_past_null_check of `function` in the ELF file at `path` (0 if it cannot be read).
uint64_t probe_offset_past_null_check(const std::string& path, const std::string& function);

// Those of `functions` the ELF file at `path` defines, each address once (the first name given
// for it): glibc's aligned_alloc is memalign, and two probes on one function would count its
// calls twice.
std::vector<std::string> functions_at_distinct_addresses(const std::string& path,
                                                         const std::vector<std::string>& functions);

}  // namespace bpfprof
