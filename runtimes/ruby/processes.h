// Finds the CRuby interpreters among the recorded processes, by their mapping of
// libruby[-X.Y].so, and works out from the library where the VM lies in each process: what
// the BPF frame walk needs (runtimes/ruby/frames.bpf.h) and where the VM loop's native frames
// are (rb_vm_exec, whose frames the Ruby frames replace).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

#include "runtimes/kit/runtime_processes.h"
#include "runtimes/ruby/events.h"
#include "runtimes/ruby/layout.h"
#include "symbols/elf/elf_file.h"
#include "userspace/model/recording.h"

namespace bpfprof {

// The version in a libruby file name: "libruby-3.1.so.3.1" (Debian), "libruby.so.3.1".
std::optional<RubyVersion> ruby_version_from_file_name(std::string_view name);

// Where ruby_global_symbols (static, so not in .dynsym) lies, in the library's addresses,
// from the code of rb_id2str, which jumps to the function that reads it:
// `cmp %reg32,last_id(%rip)` and then `mov ids(%rip),%reg64`, the one 16 bytes past the other
// as in rb_symbols_t. `code(vaddr, n)` gives the library's bytes there (fewer: not in the file).
using ReadLibraryCode = std::function<std::vector<uint8_t>(uint64_t vaddr, size_t size)>;
std::optional<uint64_t> find_ruby_global_symbols(const ReadLibraryCode& code, uint64_t id2str,
                                                 const RubyLayout& layout);

// A CRuby interpreter in one process.
struct RubyInterpreter {
  const RubyLayout* layout = nullptr;
  uint64_t vm_pointer = 0;      // &ruby_current_vm_ptr
  uint64_t global_symbols = 0;  // &ruby_global_symbols; 0: C methods are not named
  // rb_vm_exec's code: one native frame there per C-level call of the VM loop.
  uint64_t exec_start = 0;
  uint64_t exec_end = 0;

  bool runs_vm_loop(uint64_t pc) const { return pc >= exec_start && pc < exec_end; }
  bpfprof_ruby_process bpf_entry() const;
};

// What a libruby says, in its own virtual addresses, or why it gives no frames.
struct RubyLibrary {
  std::shared_ptr<const ElfFile> elf;
  const RubyLayout* layout = nullptr;
  uint64_t vm_pointer = 0;
  uint64_t exec_start = 0;
  uint64_t exec_size = 0;
  uint64_t global_symbols = 0;
};
struct RubyRejection {
  std::string reason;
};
std::variant<RubyLibrary, RubyRejection> inspect_ruby_library(const std::string& readable_path,
                                                              RubyVersion version);

class RubyProcesses final : public RuntimeProcesses<RubyInterpreter, bpfprof_ruby_process> {
 public:
  RubyProcesses()
      : RuntimeProcesses([](const std::string& base) {
          return ruby_version_from_file_name(base).has_value();
        }) {}

 private:
  void on_mapping(Pid pid, const MappingInfo& mapping, RuntimeStats& stats) override;

  std::map<std::pair<std::string, uint64_t>, std::variant<RubyLibrary, RubyRejection>> libraries_;
};

}  // namespace bpfprof
