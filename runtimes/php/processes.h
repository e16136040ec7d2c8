// Finds the PHP interpreters among the recorded processes (php-cli, php-fpm, php-cgi, a SAPI
// library libphp*.so), by their mapping of the binary, and works out where the Zend engine's
// state lies in each: the executor globals (exported), the layout for its release, and the
// native VM loop (execute_ex) whose frames the PHP frames replace.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <variant>

#include "runtimes/kit/runtime_processes.h"
#include "runtimes/php/events.h"
#include "runtimes/php/jit_stubs.h"
#include "runtimes/php/layout.h"
#include "symbols/elf/elf_file.h"
#include "userspace/model/recording.h"

namespace bpfprof {

// Whether a mapped file's base name is a PHP binary's: php, php8.2, php-fpm8.2, php-cgi8.2,
// libphp.so, libphp8.2.so.
bool is_php_file_name(std::string_view base);

// Whether a mapping is opcache's JIT buffer: its code lives in the shared memory opcache
// allocates, an executable mapping of /dev/zero.
bool is_php_jit_buffer(const std::string& path);

// A PHP interpreter in one process.
struct PhpInterpreter {
  const PhpLayout* layout = nullptr;
  uint64_t executor_globals = 0;
  // execute_ex's code: one native frame there per activation of the VM loop.
  uint64_t exec_start = 0;
  uint64_t exec_end = 0;
  // opcache's JIT code, which runs on execute_ex's frame (entered by jumps): empty without.
  uint64_t jit_start = 0;
  uint64_t jit_end = 0;
  // Its trace_exit stub, where sp is below the loop's (jit_stubs.h), in the process's addresses.
  std::optional<PhpMovedStretch> trace_exit;
  // execute_ex's CFI row over its body, by which its JIT code is walked; none: not walked.
  std::optional<bpfprof_unwind_rule> vm_rule;
  bool runs_vm_loop(uint64_t pc) const {
    return (pc >= exec_start && pc < exec_end) || (pc >= jit_start && pc < jit_end);
  }
  bpfprof_php_process bpf_entry() const;
};

// What a PHP binary says, in its own virtual addresses, or why it gives no frames.
struct PhpBinary {
  std::shared_ptr<const ElfFile> elf;
  const PhpLayout* layout = nullptr;
  uint64_t executor_globals = 0;
  uint64_t exec_start = 0;
  uint64_t exec_size = 0;
  std::optional<bpfprof_unwind_rule> vm_rule;
};
struct PhpRejection {
  std::string reason;
};
std::variant<PhpBinary, PhpRejection> inspect_php_binary(const std::string& readable_path);

class PhpProcesses final : public RuntimeProcesses<PhpInterpreter, bpfprof_php_process> {
 public:
  PhpProcesses()
      : RuntimeProcesses([](const std::string& base) {
          return is_php_file_name(base) || is_php_jit_buffer("/dev/" + base);
        }) {}

 private:
  void on_mapping(Pid pid, const MappingInfo& mapping, RuntimeStats& stats) override;
  void forgetting(Pid pid) override { jit_buffers_.erase(pid); }
  void on_jit_buffer(Pid pid, const MappingInfo& mapping);

  std::map<std::tuple<std::string, uint64_t, std::string>, std::variant<PhpBinary, PhpRejection>>
      binaries_;
  // The JIT buffer each process mapped, also before its interpreter was found.
  struct JitBuffer {
    uint64_t start = 0;
    uint64_t end = 0;
    std::optional<PhpMovedStretch> trace_exit;
  };
  std::unordered_map<Pid, JitBuffer> jit_buffers_;
};

}  // namespace bpfprof
