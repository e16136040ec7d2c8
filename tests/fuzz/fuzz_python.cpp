// libFuzzer target for what bpfprof parses of a Python process (userspace/capture/python_*):
// everything there comes from memory or names the process's user controls. The first byte
// chooses the parser:
//   0  a 3.11 location table (int32 first line, then the table): python_line_for, and the
//      line runs decoded from it, which must say the same at every code unit
//   1  str contents (a kind byte, then the data) as UTF-8: valid UTF-8, bounded
//   2  an interpreter file name
//   3  the merge of Python activations into a native stack (two word lists)
//   4  a code object with its names and table, in this process's memory (flags, first line,
//      the object, three objects for co_qualname, co_filename, co_linetable), read through
//      process_vm_readv within small or default budgets, laid out as 3.11's, 3.8's or 3.10's
//   5  a Python-stack event as the BPF side sends it
//   6  a 3.8/3.9 co_lnotab (even format byte) or 3.10 co_linetable (odd), then as 0
// Each must return (never crash, hang or read out of bounds) with consistent results.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "runtimes/python/code.h"
#include "runtimes/python/layout.h"
#include "runtimes/python/processes.h"
#include "runtimes/python/stacks.h"

using namespace bpfprof;

namespace {

class Input {
 public:
  Input(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  template <typename T>
  T take() {
    T value{};
    const size_t n = std::min(sizeof(T), size_ - pos_);
    memcpy(&value, data_ + pos_, n);
    pos_ += n;
    return value;
  }
  std::string_view take_bytes(size_t n) {
    n = std::min(n, size_ - pos_);
    std::string_view bytes(reinterpret_cast<const char*>(data_ + pos_), n);
    pos_ += n;
    return bytes;
  }
  std::string_view rest() { return take_bytes(size_ - pos_); }
  bool empty() const { return pos_ >= size_; }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

void check_runs(const std::vector<PythonLineRun>& runs) {
  if (runs.empty() || runs.back().line != 0) abort();  // ends without a line
  for (size_t i = 1; i < runs.size(); ++i)
    if (runs[i].start <= runs[i - 1].start || runs[i].line == runs[i - 1].line) abort();
}

void line_table(Input& in, PythonLineTable format) {
  const int32_t first_line = in.take<int32_t>();
  const std::string_view table = in.rest();
  const std::vector<PythonLineRun> runs = python_line_runs(format, table, first_line);
  check_runs(runs);
  // A 3.11 entry is at least a byte, an older one two; co_lnotab adds its last line's run.
  if (runs.size() > table.size() + 2) abort();
  // Every unit of a small table, a spread of a large one's, and beyond its end.
  const uint64_t units = 8 * uint64_t{table.size()} + 8;
  const uint64_t step = units <= 512 ? 1 : units / 512;
  for (uint64_t unit = 0; unit < units; unit += step)
    if (python_line_in(runs, static_cast<uint32_t>(unit)) !=
        python_line_for(format, table, first_line, static_cast<uint32_t>(unit)))
      abort();
  if (python_line_in(runs, UINT32_MAX) != python_line_for(format, table, first_line, UINT32_MAX))
    abort();
}

bool valid_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const uint8_t b = static_cast<uint8_t>(s[i]);
    const size_t n = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 0;
    if (!n || i + n > s.size()) return false;
    for (size_t k = 1; k < n; ++k)
      if ((static_cast<uint8_t>(s[i + k]) >> 6) != 2) return false;
    i += n;
  }
  return true;
}

void text(Input& in) {
  const int kind = in.take<int8_t>();
  const std::string_view data = in.rest();
  const std::string out = python_text_as_utf8(data, kind);
  if (kind != 1 && kind != 2 && kind != 4) {
    if (!out.empty()) abort();
    return;
  }
  if (!valid_utf8(out) || out.size() > data.size() / static_cast<size_t>(kind) * 4) abort();
}

void file_name(Input& in) {
  const std::string_view name = in.rest();
  if (python_version_from_file_name(name) && !name.starts_with("python") &&
      !name.starts_with("libpython"))
    abort();
}

void merge(Input& in) {
  // Native frames: words with bit 0 set run the interpreter loop. Python frames: raw
  // Python frames (bit 60), bit 0 of the id the entry flag.
  const size_t native_count = in.take<uint8_t>();
  std::vector<uint64_t> native;
  for (size_t i = 0; i < native_count && !in.empty(); ++i)
    native.push_back(in.take<uint64_t>() & ~kRuntimeRawFrameBase);
  std::vector<ActivationFrame> python;
  while (!in.empty()) {
    const uint32_t id = in.take<uint32_t>();
    python.push_back({raw_runtime_frame(RuntimeFrameId{id}), (id & 1) != 0});
  }
  const MergedStack merged = merge_runtime_frames(
      native, python, [](uint64_t pc) { return (pc & 1) != 0; }, ActivationMatch::kFromInnermost);
  size_t placed = 0;
  for (const uint64_t frame : merged.frames) placed += runtime_frame_of(frame).has_value();
  if (placed != merged.runtime_frames || placed > python.size() ||
      merged.frames.size() > native.size() + python.size() ||
      merged.frames.size() - placed > native.size() ||
      (placed < python.size() && !merged.mismatched))
    abort();
}

// Type objects: only their addresses count.
uint64_t code_type_object, str_type_object, bytes_type_object;

void code_object(Input& in) {
  const uint8_t flags = in.take<uint8_t>();
  const int32_t first_line = in.take<int32_t>();
  const PythonLayout& l = flags & 32 ? (flags & 64 ? kPython310 : kPython38) : kPython311;
  PythonInterpreter interpreter;
  interpreter.layout = &l;
  interpreter.code_type = reinterpret_cast<uint64_t>(&code_type_object);
  interpreter.str_type = reinterpret_cast<uint64_t>(&str_type_object);
  interpreter.bytes_type = reinterpret_cast<uint64_t>(&bytes_type_object);
  std::vector<uint8_t> code(l.code_size);
  const std::string_view code_bytes = in.take_bytes(code.size());
  memcpy(code.data(), code_bytes.data(), code_bytes.size());
  auto put = [](std::vector<uint8_t>& object, uint32_t offset, uint64_t value) {
    if (offset + sizeof(value) <= object.size()) memcpy(object.data() + offset, &value, 8);
  };
  if (flags & 1) put(code, l.object_type, interpreter.code_type);
  // The three objects the code object points to (left wild when the input has none).
  const uint32_t fields[] = {l.code_qualname, l.code_filename, l.code_linetable};
  const uint64_t types[] = {interpreter.str_type, interpreter.str_type, interpreter.bytes_type};
  std::vector<uint8_t> objects[3];
  for (int i = 0; i < 3; ++i) {
    const std::string_view bytes = in.take_bytes(in.take<uint16_t>());
    if (bytes.empty()) continue;
    objects[i].assign(bytes.begin(), bytes.end());
    if (flags & (2 << i)) put(objects[i], l.object_type, types[i]);
    put(code, fields[i], reinterpret_cast<uint64_t>(objects[i].data()));
  }
  PythonReadLimits limits;
  if (flags & 16) {
    limits.objects_per_process = 1;
    limits.bytes_per_process = 1024;
    limits.bytes_per_sample = 512;
    limits.failed_addresses_per_process = 1;
  }
  const Pid self{static_cast<int32_t>(getpid())};
  const uint64_t address = reinterpret_cast<uint64_t>(code.data());
  PythonCodeReader reader(limits);
  for (uint64_t time : {1, 2, 2'000'000'000}) {
    reader.start_sample();
    const PythonCodeResult read =
        reader.read(self, interpreter, address, first_line, MonotonicNs{time});
    if ((read.code != nullptr) != (read.status == PythonCodeStatus::kRead)) abort();
    if (!read.code) continue;
    // At most 4096 code points of at most 4 bytes each, as UTF-8.
    if (read.code->qualified_name.size() > 4 * 4096 || read.code->filename.size() > 4 * 4096 ||
        !valid_utf8(read.code->qualified_name) || !valid_utf8(read.code->filename))
      abort();
    if (!read.code->lines.empty()) check_runs(read.code->lines);
  }
}

void stack_event(Input& in) {
  const std::string_view event = in.rest();
  PythonProcesses processes;
  PythonStacks stacks(processes);
  RuntimeStats stats;
  stacks.take_event(event.data(), event.size(), stats);
  if (stats.stacks > 1) abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  Input in(data + 1, size - 1);
  switch (data[0] % 7) {
    case 0:
      line_table(in, PythonLineTable::kLocations);
      break;
    case 1:
      text(in);
      break;
    case 2:
      file_name(in);
      break;
    case 3:
      merge(in);
      break;
    case 4:
      code_object(in);
      break;
    case 5:
      stack_event(in);
      break;
    case 6:
      line_table(in,
                 in.take<uint8_t>() % 2 ? PythonLineTable::kLinetable : PythonLineTable::kLnotab);
      break;
  }
  return 0;
}
