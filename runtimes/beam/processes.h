// Finds the BEAM emulators (beam.smp) among the recorded processes and what the walk through
// their JIT code needs of each (runtimes/beam/walk.bpf.h): its release's layout and the
// binary's addresses (binary.h), then, once the JIT has started (its code blocks mapped,
// beam_normal_exit set, process_main registered with GDB's JIT interface), the process's
// entry for the kernel side. New JIT blocks (asmjit maps a larger one as code grows) renew it.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <unordered_map>
#include <variant>
#include <vector>

#include "runtimes/beam/binary.h"
#include "runtimes/beam/code_index.h"
#include "runtimes/beam/events.h"
#include "runtimes/kit/runtime_processes.h"
#include "symbols/elf/elf_file.h"
#include "userspace/model/recording.h"

namespace bpfprof {

// Whether a mapping may hold the JIT's code: its dual-mapped memfd, or (with +JPperf)
// anonymous memory.
bool is_beam_jit_mapping(const std::string& path);

// An emulator in one process: addresses in the process (the binary's load bias applied).
struct BeamEmulator {
  const BeamLayout* layout = nullptr;
  BeamAddresses addresses;
  std::vector<BeamCodeRange> jit_blocks;
  BeamCodeRange process_main;  // the JIT's scheduler loop
  uint64_t normal_exit = 0;
  BeamCodeRange call_nif;
  BeamCodeRange call_dirty_nif;
  BeamCodeRange call_dirty_bif;
  bool in_jit(uint64_t pc) const {
    for (const BeamCodeRange& block : jit_blocks)
      if (block.contains(pc)) return true;
    return false;
  }
};

struct InspectedBeam {
  std::variant<BeamBinary, BeamRejection> binary;
  std::shared_ptr<const ElfFile> elf;  // for the load bias
};

class BeamProcesses final : public RuntimeProcesses<BeamEmulator, bpfprof_beam_process> {
 public:
  BeamProcesses()
      : RuntimeProcesses([](const std::string& base) {
          return is_beam_file_name(base) || is_beam_jit_mapping("/" + base) || base == "anon";
        }) {}
  // Emulators whose JIT had not started, or that mapped code since: looked at again, each
  // at most every kRetry.
  void refresh();

 private:
  struct Found {
    const BeamBinary* binary = nullptr;
    uint64_t bias = 0;
    std::optional<BeamCodeRange> process_main;
    std::chrono::steady_clock::time_point tried{};
    bool mapped_code = true;  // a JIT mapping since the last look
  };
  void on_mapping(Pid pid, const MappingInfo& mapping, RuntimeStats& stats) override;
  void forgetting(Pid pid) override { found_.erase(pid); }
  void look(Pid pid, Found& found);

  std::map<std::tuple<std::string, uint64_t, std::string>, InspectedBeam> binaries_;
  std::unordered_map<Pid, Found> found_;
};

}  // namespace bpfprof
