// Finds the CPython interpreters among the recorded processes, by their mapping of a
// python3.X executable or libpython3.X shared object, and works out from the binary where
// the interpreter's state lies in each process: what the BPF frame walk needs
// (runtimes/python/frames.bpf.h) and what naming and merging need (runtimes/python/stacks.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

#include "runtimes/kit/runtime_processes.h"
#include "runtimes/python/events.h"
#include "runtimes/python/layout.h"
#include "symbols/elf/elf_file.h"
#include "userspace/model/recording.h"

namespace bpfprof {

// A CPython interpreter in one process.
struct PythonInterpreter {
  const PythonLayout* layout = nullptr;
  uint64_t runtime = 0;    // &_PyRuntime
  uint64_t code_type = 0;  // &PyCode_Type: every code object's ob_type
  // _PyEval_EvalFrameDefault's code: a native frame there is an activation of the
  // interpreter loop, whose Python frames take its place.
  uint64_t eval_start = 0;
  uint64_t eval_end = 0;
  // &PyUnicode_Type and &PyBytes_Type: the type of a code object's names and of its location
  // table (0: not known, not checked).
  uint64_t str_type = 0;
  uint64_t bytes_type = 0;

  bool runs_interpreter_loop(uint64_t pc) const { return pc >= eval_start && pc <= eval_end; }
  bpfprof_python_process bpf_entry() const;
};

// What an interpreter's file says, in its own virtual addresses (before the load bias).
struct PythonBinary {
  std::shared_ptr<const ElfFile> elf;  // its load segments place a mapping's bias
  const PythonLayout* layout = nullptr;
  uint64_t runtime = 0;
  uint64_t code_type = 0;
  uint64_t eval_start = 0;
  uint64_t eval_size = 0;
  uint64_t str_type = 0;  // 0 where the binary does not say
  uint64_t bytes_type = 0;
};

// Why a file that is named like an interpreter gives no frames: one line of the summary.
struct PythonRejection {
  std::string reason;
};
// An executable that runs the interpreter of a libpython it links (pyenv's, python.org's
// shared builds): the library's own mapping is the interpreter; nothing to say.
struct PythonLauncher {};
using PythonInspection = std::variant<PythonBinary, PythonRejection, PythonLauncher>;

// Reads and checks an interpreter file: its version (name, and Py_Version where it has one)
// must have a layout, the symbols must be there, and PyCode_Type's tp_basicsize must be the
// layout's size of a code object.
PythonInspection inspect_python_binary(const std::string& readable_path,
                                       PythonVersion named_version);

// 3.13+: the offsets that _Py_DebugOffsets (the start of _PyRuntime's initial contents, at
// `runtime` in the file's addresses) states must be `layout`'s; nothing for older versions.
std::optional<PythonRejection> check_debug_offsets(int fd, const ElfFile& elf, uint64_t runtime,
                                                   const PythonLayout& layout);

class PythonProcesses final : public RuntimeProcesses<PythonInterpreter, bpfprof_python_process> {
 public:
  PythonProcesses()
      : RuntimeProcesses([](const std::string& base) {
          return python_version_from_file_name(base).has_value();
        }) {}

 private:
  void on_mapping(Pid pid, const MappingInfo& mapping, RuntimeStats& stats) override;
  const PythonInspection& binary_for(const MappingInfo& mapping, PythonVersion version);

  // By path and inode: a binary is read once however many processes run it.
  std::map<std::pair<std::string, uint64_t>, PythonInspection> binaries_;
};

}  // namespace bpfprof
