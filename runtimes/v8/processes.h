// Finds the V8 processes (Node.js) among the recorded ones, by their mapping of a node
// binary that exports V8's post-mortem metadata (runtimes/v8/layout.h), and keeps each one's
// layout: for the BPF side its frame slots, for naming its objects'.
#pragma once

#include <cstdint>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

#include "runtimes/kit/runtime_processes.h"
#include "runtimes/v8/events.h"
#include "runtimes/v8/layout.h"
#include "userspace/model/recording.h"

namespace bpfprof::v8 {

// Whether a mapped file's name is one that runs V8 with its metadata exported (node, nodejs,
// libnode.so.N): only those are opened and read.
bool is_v8_file_name(const std::string& base);

// Reads a binary's V8 layout from its file: its v8dbg_ symbols' values in its initialized data.
std::variant<V8Layout, std::string> read_binary_layout(const std::string& readable_path);

class V8Processes final : public RuntimeProcesses<const V8Layout*, bpfprof_v8_process> {
 public:
  V8Processes() : RuntimeProcesses(is_v8_file_name) {}
  const V8Layout* find(Pid pid) const {
    const V8Layout* const* layout = RuntimeProcesses::find(pid);
    return layout ? *layout : nullptr;
  }

  // Also the processes whose binary's layout has been read since (on a thread of its own:
  // reading node's .dynsym takes 40-150 ms, which the recorder's loop must not wait for while
  // the process maps its first JIT code).
  std::vector<Change> take_changes(RuntimeStats& stats);
  // Whether a process waits for its binary's layout.
  bool waiting() const { return !waiting_.empty(); }

 private:
  void on_mapping(Pid pid, const MappingInfo& mapping, RuntimeStats& stats) override;
  void forgetting(Pid pid) override;

  // By path and inode: a binary is read once however many processes run it.
  using BinaryKey = std::pair<std::string, uint64_t>;
  using Layout = std::variant<V8Layout, std::string>;
  std::map<BinaryKey, std::shared_future<Layout>> binaries_;
  // A process's mapping of a V8 binary, waiting for the binary's layout.
  struct Waiting {
    Pid pid;
    BinaryKey key;
    uint64_t start, length, file_offset;
  };
  std::vector<Waiting> waiting_;
  // The kernel side's entry of the process `w` is a mapping of, with its interpreter's
  // addresses where its mappings of that binary among `mapped` hold them.
  static bpfprof_v8_process entry_of(const Waiting& w, const V8Layout& layout,
                                     const std::vector<Waiting>& mapped);
  // Adds to `entry` the interpreter's code in a mapping (its start, length and offset in the
  // binary), what of it is there and not known yet: true if any.
  static bool add_interpreter(bpfprof_v8_process& entry, const V8Layout& layout, uint64_t start,
                              uint64_t length, uint64_t file_offset);
  std::unordered_map<Pid, bpfprof_v8_process> entries_;  // as the kernel side has them
};

}  // namespace bpfprof::v8
