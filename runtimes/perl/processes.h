// Finds the perls among the recorded processes (the executable perl, perl5.36.0), by their
// mapping of it, and works out where each thread's interpreter is (a thread-local at a fixed
// offset from the thread pointer), the layout for its release, and the native op loop
// (Perl_runops_standard) whose frames the Perl frames replace.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <variant>

#include "runtimes/kit/runtime_processes.h"
#include "runtimes/perl/binary.h"
#include "runtimes/perl/events.h"
#include "runtimes/perl/layout.h"
#include "userspace/model/recording.h"

namespace bpfprof {

// A perl interpreter in one process.
struct PerlInterpreter {
  const PerlLayout* layout = nullptr;
  int64_t tls_offset = 0;
  // Perl_runops_standard's code: one native frame there per run of the op loop.
  uint64_t runops_start = 0;
  uint64_t runops_end = 0;
  bool runs_op_loop(uint64_t pc) const { return pc >= runops_start && pc < runops_end; }
  bpfprof_perl_process bpf_entry() const;
};

class PerlProcesses final : public RuntimeProcesses<PerlInterpreter, bpfprof_perl_process> {
 public:
  PerlProcesses() : RuntimeProcesses(is_perl_file_name) {}

 private:
  void on_mapping(Pid pid, const MappingInfo& mapping, RuntimeStats& stats) override;

  std::map<std::tuple<std::string, uint64_t, std::string>, std::variant<PerlBinary, PerlRejection>>
      binaries_;
};

}  // namespace bpfprof
