// Finds the Go programs that label their goroutines (those linking
// runtime/pprof.runtime_setProfLabel, which pprof.Do and SetGoroutineLabels go through) among
// the recorded processes, by their executable, and works out where the BPF reader
// (runtimes/golabels/frames.bpf.h) finds the running goroutine's labels: g's thread-pointer
// slot and m.curg from the binary's systemstack switch, g.labels from the setter's code, the
// labels' form from the Go release (symbols/go/labels_layout.h).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <tuple>

#include "runtimes/golabels/events.h"
#include "runtimes/kit/runtime_processes.h"
#include "symbols/go/labels_layout.h"
#include "userspace/model/recording.h"

namespace bpfprof {

// The kernel side's entry for a binary's site of its labels.
bpfprof_go_labels_process go_labels_entry(const go::LabelsSite& site);

// What an executable says: where its labels are, or why it has none (empty: not a Go
// program that sets labels, nothing to say).
struct GoLabelsBinary {
  std::optional<go::LabelsSite> site;
  std::string rejection;
};
GoLabelsBinary inspect_go_labels_binary(const std::string& readable_path);

struct GoLabelsProgram {};

class GoLabelsProcesses final
    : public RuntimeProcesses<GoLabelsProgram, bpfprof_go_labels_process> {
 public:
  // Any file may be a Go program: each is looked at once (its headers first).
  GoLabelsProcesses() : RuntimeProcesses([](const std::string&) { return true; }) {}

 private:
  void on_mapping(Pid pid, const MappingInfo& mapping, RuntimeStats& stats) override;

  // By path, inode and build-id.
  std::map<std::tuple<std::string, uint64_t, std::string>, GoLabelsBinary> binaries_;
};

}  // namespace bpfprof
