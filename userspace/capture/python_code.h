// Names the code objects that the BPF side reports: reads each one once from the live
// process (process_vm_readv: co_qualname, co_filename, co_firstlineno, co_linetable), keeps
// it by address, and turns an instruction offset into a line with the 3.11 location table
// (CPython's Objects/locations.md).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "userspace/capture/python_processes.h"
#include "userspace/model/ids.h"

namespace bpfprof {

// The line of the instruction `code_unit` (an index in 2-byte code units) in a 3.11+
// location table (co_linetable) of a function that starts at `first_line`; nullopt if no
// entry covers it or the entry has no line.
std::optional<uint32_t> python_line_for(std::string_view linetable, int first_line,
                                        uint32_t code_unit);

// Text of a str object's contents as stored: `kind` 1 (latin-1), 2 (UCS-2) or 4 (UCS-4)
// bytes per code point, as UTF-8.
std::string python_text_as_utf8(std::string_view data, int kind);

struct PythonCode {
  std::string qualified_name;
  std::string filename;
  int first_line = 0;
  std::string linetable;
};

class PythonCodeReader {
 public:
  // The code object at `address` in `pid`; read once and kept while the address keeps
  // holding a code object of that first line (a freed one's address may be reused).
  const PythonCode* read(Pid pid, const PythonInterpreter& interpreter, uint64_t address,
                         int first_line);
  void forget(Pid pid);
  uint64_t objects_read() const { return objects_read_; }

 private:
  std::optional<PythonCode> read_uncached(Pid pid, const PythonInterpreter& interpreter,
                                          uint64_t address);

  // By pid << 64 | address, as two keys.
  std::unordered_map<Pid, std::unordered_map<uint64_t, PythonCode>> cache_;
  uint64_t objects_read_ = 0;
};

}  // namespace bpfprof
