// The end-of-run summary's figures, measured on the stacks as written: how many user stacks
// reach a thread root, where code could not be named, the functions most samples were in,
// and how much each source file weighs (--embed-sources takes the heaviest first). On-CPU
// samples only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "userspace/model/session_model.h"
#include "userspace/output/profile_tables.h"

namespace bpfprof {

// On-CPU sample weight with a user stack, and the part whose outermost user frame is a
// thread root (the rest begins with a [truncated] frame).
struct StackCompleteness {
  double complete = 0;
  double total = 0;
  double share() const { return total > 0 ? complete / total : 1.0; }
};

// How a stack begins, decided by its outermost frame.
enum class StackRoot : uint8_t { kNoUserFrames, kThreadRoot, kTruncated };

// The threads written and the tables their stacks became.
struct WrittenStacks {
  const SessionModel& model;
  const std::vector<const Thread*>& threads;
  const SharedTables& shared;
  const LibTable& libs;
  const std::vector<StackIndex>& output_stack_of;  // by model stack
};

struct UserStackFigures {
  StackCompleteness all;
  // "name (pid)" of the processes with truncated user stacks, most truncated weight first.
  std::vector<std::pair<std::string, StackCompleteness>> incomplete_by_process;
  // Where truncated user stacks end: the function of the frame under [truncated], with its
  // share of the user stacks' weight, most first (at most kTruncatedAtKept).
  std::vector<std::pair<std::string, double>> truncated_at;
};
inline constexpr size_t kTruncatedAtKept = 10;
// `root_of`: how each model stack begins.
UserStackFigures measure_user_stacks(const WrittenStacks& written,
                                     const std::vector<StackRoot>& root_of);

// The share of on-CPU sample weight whose leaf frame is one of `unnamed_frames` (named only by
// its address), by library, most first.
std::vector<std::pair<std::string, double>> unnamed_share_by_library(
    const WrittenStacks& written, const std::unordered_set<uint32_t>& unnamed_frames);

// Of `shares` (unnamed_share_by_library), the paths of the first three with at least 1%:
// where debug information would help.
std::vector<std::string> unnamed_library_paths(
    const std::vector<std::pair<std::string, double>>& shares, const LibTable& libs);

// The functions most samples were in (self time), "name (library)" with their share of the
// on-CPU sample weight, most first; at most `count`.
std::vector<std::pair<std::string, double>> top_self_functions(const WrittenStacks& written,
                                                               size_t count);

// On-CPU sample weight per source file: a sample counts once for each file on its stack, so
// that the files of the hot functions and of their callers come first.
std::vector<double> source_weights(const WrittenStacks& written);

// record --memory: the memory the threads first touched (their page-fault samples), or with
// --allocations the blocks they allocated; and the stacks that did most, heaviest first (at
// most `count`), each named by its innermost functions, innermost first ("memset < grow <
// main").
struct MemoryGrowth {
  uint64_t bytes = 0;
  std::vector<std::pair<std::string, uint64_t>> top_stacks;
};
MemoryGrowth memory_growth(const WrittenStacks& written, size_t count);
// record --allocations: the sampled blocks still held at the end, and where they were
// allocated.
MemoryGrowth memory_held(const WrittenStacks& written, size_t count);
// record --memory: the sampled system calls that grew the address space (what they stand
// for, by stack) and shrank it.
struct AddressSpaceGrowth {
  MemoryGrowth grown;
  uint64_t shrunk_bytes = 0;
  uint64_t calls = 0;  // sampled
};
AddressSpaceGrowth address_space_growth(const WrittenStacks& written, size_t count);

}  // namespace bpfprof
