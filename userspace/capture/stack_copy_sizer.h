// How many bytes of each process's user stack the kernel side copies per sample (DWARF
// mode). Every process starts at the configured size; one whose stack is cut where the copy
// ended (the unwinder needed bytes above it, and the stack went on) gets at least twice what
// that read needed, up to the largest copy, so that a program with a 20 KB frame or a deep
// stack is unwound completely without every other process paying for large copies. A size
// learnt for an executable is given at once to its later processes (make, git gc and shell
// pipelines start the same programs again and again), and a forked child keeps its parent's.
// The kernel side applies both at once (a short-lived child's first samples are taken before
// userspace reads its exec event): a child gets its parent's size at fork, and an exec of a
// file whose size was learnt gets that size, from the file changes below.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "userspace/capture/file_key.h"
#include "userspace/model/ids.h"

namespace bpfprof {

class StackCopySizer {
 public:
  StackCopySizer(uint32_t initial_bytes, uint32_t max_bytes)
      : initial_(initial_bytes), max_(max_bytes) {}

  // One unwound sample of `pid` whose copy could take `copy_limit` bytes; `bytes_needed` is
  // non-zero when the copy ended below the end of the stack and the unwinder needed that
  // many.
  void observe(Pid pid, uint64_t bytes_needed, uint32_t copy_limit) {
    if (bytes_needed == 0) return;
    const uint32_t bytes = bytes_for(pid);
    // Samples copied before the last raise (still in flight then) say nothing of the new size.
    if (copy_limit < bytes || bytes >= max_) return;
    uint64_t raised = uint64_t{bytes} * 2;
    while (raised < 2 * bytes_needed && raised < max_) raised *= 2;
    set(pid, static_cast<uint32_t>(std::min<uint64_t>(raised, max_)));
    auto executable = executable_of_.find(pid);
    if (executable != executable_of_.end()) learn(executable->second, bytes_for(pid));
  }
  void on_fork(Pid parent, Pid child) {
    if (auto executable = executable_of_.find(parent); executable != executable_of_.end())
      executable_of_[child] = executable->second;
    if (bytes_for(parent) != bytes_for(child)) set(child, bytes_for(parent));
  }
  // `file`: the file the kernel saw exec'd (device as the kernel encodes it, inode), if known.
  void on_exec(Pid pid, const std::string& executable,
               std::optional<bpfprof_file_key> file = std::nullopt) {
    executable_of_[pid] = executable;
    Learnt& learnt = learnt_[executable];
    const auto known = [&](const bpfprof_file_key& f) { return same_file(f, *file); };
    if (file && std::none_of(learnt.files.begin(), learnt.files.end(), known)) {
      learnt.files.push_back(*file);
      if (learnt.bytes) file_changes_.emplace_back(*file, learnt.bytes);
    }
    const uint32_t bytes = learnt.bytes ? learnt.bytes : initial_;
    if (bytes != bytes_for(pid)) set(pid, bytes);
  }
  void on_exit(Pid pid) {
    if (bytes_.erase(pid)) changes_.emplace_back(pid, initial_);  // the pid may be reused
    executable_of_.erase(pid);
  }

  uint32_t bytes_for(Pid pid) const {
    auto it = bytes_.find(pid);
    return it == bytes_.end() ? initial_ : it->second;
  }
  // The processes whose size changed since the last call, with their new sizes.
  std::vector<std::pair<Pid, uint32_t>> take_changes() { return std::exchange(changes_, {}); }
  // The files whose learnt size changed since the last call, with their sizes.
  std::vector<std::pair<bpfprof_file_key, uint32_t>> take_file_changes() {
    return std::exchange(file_changes_, {});
  }

 private:
  struct Learnt {
    uint32_t bytes = 0;  // 0: nothing learnt
    std::vector<bpfprof_file_key> files;
  };

  void set(Pid pid, uint32_t bytes) {
    bytes_[pid] = bytes;
    changes_.emplace_back(pid, bytes);
  }
  void learn(const std::string& executable, uint32_t bytes) {
    Learnt& learnt = learnt_[executable];
    if (bytes <= learnt.bytes) return;
    learnt.bytes = bytes;
    for (const bpfprof_file_key& file : learnt.files) file_changes_.emplace_back(file, bytes);
  }

  uint32_t initial_;
  uint32_t max_;
  std::unordered_map<Pid, uint32_t> bytes_;  // where not initial_
  std::unordered_map<Pid, std::string> executable_of_;
  std::unordered_map<std::string, Learnt> learnt_;
  std::vector<std::pair<Pid, uint32_t>> changes_;
  std::vector<std::pair<bpfprof_file_key, uint32_t>> file_changes_;
};

}  // namespace bpfprof
