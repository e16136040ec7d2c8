// Names the code objects that the BPF side reports: reads each one once from the live
// process (process_vm_readv: co_qualname, co_filename, co_firstlineno, co_linetable; co_name
// and co_lnotab before 3.11), keeps it by address, and turns an instruction offset into a
// line with the version's line table: the 3.11 location table (CPython's
// Objects/locations.md), 3.10's co_linetable or 3.8's co_lnotab (Objects/lnotab_notes.txt).
//
// The process's memory is its owner's to fill, so what it holds is never trusted: every
// size read from it is bounded, and reading has a budget per process and per sample. A code
// object that cannot be read, or one past the budget, is no name (the caller shows an
// "[unknown ...]" frame), never a hang or unbounded memory.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "runtimes/python/processes.h"
#include "userspace/model/ids.h"

namespace bpfprof {

// The line of the instruction `code_unit` (an index in 2-byte code units) in a line table of
// `format` of a function that starts at `first_line`; nullopt if no entry covers it or the
// entry has no line.
std::optional<uint32_t> python_line_for(PythonLineTable format, std::string_view linetable,
                                        int first_line, uint32_t code_unit);

// A location table decoded once, so that each line costs a binary search however large the
// table: code units from `start` up to the next run's start are on `line` (0: none). The
// last run starts where the table's entries end, without a line.
struct PythonLineRun {
  uint32_t start = 0;
  uint32_t line = 0;
  bool operator==(const PythonLineRun&) const = default;
};
std::vector<PythonLineRun> python_line_runs(PythonLineTable format, std::string_view linetable,
                                            int first_line);
// What python_line_for says of the table the runs were decoded from.
std::optional<uint32_t> python_line_in(std::span<const PythonLineRun> runs, uint32_t code_unit);

// Text of a str object's contents as stored: `kind` 1 (latin-1), 2 (UCS-2) or 4 (UCS-4)
// bytes per code point, as UTF-8.
std::string python_text_as_utf8(std::string_view data, int kind);

struct PythonCode {
  std::string qualified_name;
  std::string filename;
  int first_line = 0;
  std::vector<PythonLineRun> lines;
};

// What naming the code objects of one process, and of one sample, may cost.
struct PythonReadLimits {
  // Code objects read (each attempt counts, failed or not). A large Django application holds
  // ~100k code objects; some are read twice (freed, and another made at the same address):
  // 256k leaves room for both, and ends a process that shows new garbage addresses at every
  // sample after ~0.5 s of reading.
  uint64_t objects_per_process = 256 * 1024;
  // Bytes copied out of the process and kept as line runs: several times what a large
  // application's code objects, with their names and location tables, take.
  uint64_t bytes_per_process = uint64_t{256} << 20;
  // A sample's frames (at most BPFPROF_MAX_PYTHON_FRAMES), all new, read a small fraction of
  // this in real code objects; one large generated function's table is up to 1 MiB. Past this, the
  // sample's other new frames are named at a later sample: one sample never costs more than
  // this (and one object, ~1.1 MiB, started below it) of copying.
  uint64_t bytes_per_sample = uint64_t{4} << 20;
  // Addresses that held no readable code object are not read again for `retry_after_ns`
  // while the frames name them with the same first line: the kernel side read a frame at a
  // moment its code object was freed or not yet complete, and the next object there, or the
  // same one complete, may be real (a frame that names it with another first line is read
  // at once). At most this many per process, all forgotten when it is full (each read
  // still counts against the budget).
  size_t failed_addresses_per_process = 4096;
  uint64_t retry_after_ns = 250'000'000;
  // Each process's cache of named frames (runtimes/python/stacks.h), by code object and
  // instruction, is emptied when it holds this many: a real program samples far fewer distinct
  // places (the recording's frame table keeps their names), and a process that shows a new
  // instruction at every sample does not grow it.
  size_t named_frames_per_process = 256 * 1024;
};

enum class PythonCodeStatus {
  kRead,
  kUnreadable,           // not a code object, or its names are not str objects
  kProcessBudgetUsedUp,  // this process's budget: no more code objects read in it
  kSampleBudgetUsedUp,   // this sample's: a later sample may name it
};
struct PythonCodeResult {
  const PythonCode* code = nullptr;
  PythonCodeStatus status = PythonCodeStatus::kUnreadable;
};

class PythonCodeReader {
 public:
  explicit PythonCodeReader(PythonReadLimits limits = {}) : limits_(limits) {}

  // Begins a sample: its byte budget is full again.
  void start_sample() { sample_bytes_ = 0; }
  // The code object at `address` in `pid` (for a sample at `time`); read once and kept while
  // the address keeps holding a code object of that first line (a freed one's address may
  // be reused).
  PythonCodeResult read(Pid pid, const PythonInterpreter& interpreter, uint64_t address,
                        int first_line, MonotonicNs time);
  void forget(Pid pid);
  uint64_t objects_read() const { return objects_read_; }
  // Processes whose budget was used up.
  uint64_t processes_over_budget() const { return processes_over_budget_; }

 private:
  struct Process {
    std::unordered_map<uint64_t, PythonCode> codes;  // by address
    struct Failure {
      MonotonicNs time;
      int first_line;
    };
    std::unordered_map<uint64_t, Failure> failed;  // by address
    uint64_t objects = 0;
    uint64_t bytes = 0;
    bool over_budget = false;
  };
  class Budgeted;
  std::optional<PythonCode> read_uncached(Budgeted& memory, const PythonInterpreter& interpreter,
                                          uint64_t address);

  PythonReadLimits limits_;
  std::unordered_map<Pid, Process> processes_;
  uint64_t sample_bytes_ = 0;
  uint64_t objects_read_ = 0;
  uint64_t processes_over_budget_ = 0;
};

}  // namespace bpfprof
