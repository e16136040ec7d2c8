#include "runtimes/python/code.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "runtimes/kit/remote_memory.h"
#include "symbols/util/text.h"

namespace bpfprof {

namespace {

// Names and file paths longer than this are cut: a str whose header was overwritten (the
// object freed while being read) must not make us read megabytes.
constexpr uint64_t kMaxTextCodePoints = 4096;
// A str that says it is longer than this is no name or path of a real program (a path is at
// most 4096 bytes): its header is garbage, not a long text to cut.
constexpr uint64_t kMaxPlausibleCodePoints = 1 << 20;
// Location tables grow with a function's size: 1 MiB is a function of ~100k instructions.
constexpr uint64_t kMaxLinetableBytes = 1 << 20;

uint64_t word_at(const std::vector<uint8_t>& bytes, uint32_t offset) {
  uint64_t value = 0;
  if (offset + sizeof(value) <= bytes.size()) memcpy(&value, bytes.data() + offset, sizeof(value));
  return value;
}

// The location table's variable-length numbers: 6 bits per byte, bit 6 = more follow.
class LinetableReader {
 public:
  explicit LinetableReader(std::string_view table) : table_(table) {}
  bool done() const { return pos_ >= table_.size(); }
  uint8_t byte() { return done() ? 0 : static_cast<uint8_t>(table_[pos_++]); }
  uint32_t varint() {
    uint8_t b = byte();
    uint32_t value = b & 63;
    for (uint32_t shift = 6; (b & 64) && shift < 32 && !done(); shift += 6) {
      b = byte();
      value |= static_cast<uint32_t>(b & 63) << shift;
    }
    return value;
  }
  int32_t svarint() {
    const uint32_t value = varint();
    return (value & 1) ? -static_cast<int32_t>(value >> 1) : static_cast<int32_t>(value >> 1);
  }
  void skip(size_t n) { pos_ = std::min(table_.size(), pos_ + n); }

 private:
  std::string_view table_;
  size_t pos_ = 0;
};

// One entry of a location table: `length` code units on `line` (none when it has no line).
struct LinetableEntry {
  uint32_t length = 0;
  std::optional<uint32_t> line;
};

// The line as an entry has it: none past 32 bits or below 1 (garbage: each entry moves it by
// up to 2^31).
std::optional<uint32_t> valid_line(int64_t line) {
  return line > 0 && line <= UINT32_MAX ? std::optional<uint32_t>(static_cast<uint32_t>(line))
                                        : std::nullopt;
}

// The entries of a 3.11+ location table, in order, until its end or its first byte that does
// not begin an entry (not a 3.11 table, or garbage).
class LocationEntries {
 public:
  LocationEntries(std::string_view table, int first_line) : r_(table), line_(first_line) {}
  bool next(LinetableEntry& entry) {
    if (r_.done()) return false;
    const uint8_t first = r_.byte();
    if (!(first & 0x80)) return false;
    const int code = first >> 3 & 15;
    entry.length = (first & 7) + 1u;
    bool has_line = true;
    if (code == 15) {
      has_line = false;  // no location
    } else if (code == 14) {
      line_ += r_.svarint();  // long form: then end line, column, end column
      r_.varint();
      r_.varint();
      r_.varint();
    } else if (code == 13) {
      line_ += r_.svarint();  // no columns
    } else if (code >= 10) {
      line_ += code - 10;  // one-line forms: column and end column bytes
      r_.skip(2);
    } else {
      r_.skip(1);  // short forms: same line, one column byte
    }
    entry.line = has_line ? valid_line(line_) : std::nullopt;
    return true;
  }

 private:
  LinetableReader r_;
  int64_t line_;
};

// The entries of a 3.8-3.10 table of byte pairs: a byte increment of the address (unsigned)
// and a line increment (signed), in code units; pairs that move no whole unit only move the
// line. co_lnotab (3.8, 3.9): a pair's line holds from its address on, the last one to the
// end of the code (an entry up to the largest unit). co_linetable (3.10): a pair is a range
// of that length on the line moved by the increment, -128 for none; past the last, no line.
class BytePairEntries {
 public:
  BytePairEntries(PythonLineTable format, std::string_view table, int first_line)
      : table_(table), lnotab_(format == PythonLineTable::kLnotab), line_(first_line) {}
  bool next(LinetableEntry& entry) {
    while (pos_ + 2 <= table_.size()) {
      const uint8_t length = static_cast<uint8_t>(table_[pos_]);
      const int8_t increment = static_cast<int8_t>(table_[pos_ + 1]);
      pos_ += 2;
      const uint64_t end = byte_ + length;
      entry.length = static_cast<uint32_t>(end / 2 - byte_ / 2);
      byte_ = end;
      if (lnotab_) {
        entry.line = valid_line(line_);
        line_ += increment;
      } else {
        if (increment != -128) line_ += increment;
        entry.line = increment == -128 ? std::nullopt : valid_line(line_);
      }
      if (entry.length > 0) return true;
    }
    // co_lnotab's last line runs to the end of the code, whose size the table does not say.
    if (!lnotab_ || tail_done_ || byte_ / 2 >= UINT32_MAX) return false;
    tail_done_ = true;
    entry = {static_cast<uint32_t>(UINT32_MAX - byte_ / 2), valid_line(line_)};
    return true;
  }

 private:
  std::string_view table_;
  bool lnotab_;
  size_t pos_ = 0;
  uint64_t byte_ = 0;
  int64_t line_;
  bool tail_done_ = false;
};

// The entries of a table of any version's format.
class LinetableEntries {
 public:
  LinetableEntries(PythonLineTable format, std::string_view table, int first_line)
      : format_(format),
        first_line_(first_line),
        locations_(table, first_line),
        pairs_(format, table, first_line) {}
  bool next(LinetableEntry& entry) {
    const bool more =
        format_ == PythonLineTable::kLocations ? locations_.next(entry) : pairs_.next(entry);
    // The instructions before the first located one (3.11+: COPY_FREE_VARS, MAKE_CELL,
    // RETURN_GENERATOR) set up the frame: a frame there has entered the function, on its
    // first line. A table with no located entry at all says nothing.
    if (more && in_prologue_) {
      if (entry.line) {
        in_prologue_ = false;
      } else if (first_line_ > 0 && located_entry_follows()) {
        entry.line = static_cast<uint32_t>(first_line_);
      }
    }
    return more;
  }

 private:
  bool located_entry_follows() {
    if (!located_after_prologue_) {
      LinetableEntries rest = *this;
      rest.in_prologue_ = false;
      located_after_prologue_ = false;
      for (LinetableEntry entry; rest.next(entry);)
        if (entry.line) {
          located_after_prologue_ = true;
          break;
        }
    }
    return *located_after_prologue_;
  }

  PythonLineTable format_;
  int first_line_;
  bool in_prologue_ = true;
  std::optional<bool> located_after_prologue_;
  LocationEntries locations_;
  BytePairEntries pairs_;
};

}  // namespace

std::string python_text_as_utf8(std::string_view data, int kind) {
  std::string out;
  if (kind != 1 && kind != 2 && kind != 4) return out;
  const size_t width = static_cast<size_t>(kind);
  for (size_t i = 0; i + width <= data.size(); i += width) {
    uint32_t c = 0;
    memcpy(&c, data.data() + i, width);  // little-endian, as the machine stores it
    append_utf8(out, c);
  }
  return out;
}

std::optional<uint32_t> python_line_for(PythonLineTable format, std::string_view linetable,
                                        int first_line, uint32_t code_unit) {
  LinetableEntries entries(format, linetable, first_line);
  uint64_t start = 0;
  for (LinetableEntry entry; entries.next(entry); start += entry.length)
    if (code_unit < start + entry.length) return entry.line;
  return std::nullopt;
}

std::vector<PythonLineRun> python_line_runs(PythonLineTable format, std::string_view linetable,
                                            int first_line) {
  std::vector<PythonLineRun> runs;
  LinetableEntries entries(format, linetable, first_line);
  uint64_t start = 0;
  for (LinetableEntry entry; entries.next(entry); start += entry.length) {
    // Units past 32 bits cannot be asked for (and a table holds at most 8 per byte).
    if (start + entry.length > UINT32_MAX) break;
    const uint32_t line = entry.line.value_or(0);
    if (runs.empty() || runs.back().line != line)
      runs.push_back({static_cast<uint32_t>(start), line});
  }
  if (runs.empty() || runs.back().line != 0) runs.push_back({static_cast<uint32_t>(start), 0});
  return runs;
}

std::optional<uint32_t> python_line_in(std::span<const PythonLineRun> runs, uint32_t code_unit) {
  // The last run that starts at or before the unit.
  auto after =
      std::upper_bound(runs.begin(), runs.end(), code_unit,
                       [](uint32_t unit, const PythonLineRun& run) { return unit < run.start; });
  if (after == runs.begin() || (after - 1)->line == 0) return std::nullopt;
  return (after - 1)->line;
}

// Reads from one process for one code object, counting what is copied against the process's
// and the sample's budgets.
class PythonCodeReader::Budgeted {
 public:
  Budgeted(Pid pid, Process& process, uint64_t& sample_bytes)
      : memory_(pid), process_(process), sample_bytes_(sample_bytes) {}

  bool read(uint64_t address, void* out, size_t size) {
    if (!address) return false;
    if (!size) return true;
    charge(size);
    return memory_.read(address, out, size);
  }
  void charge(uint64_t bytes) {
    process_.bytes += bytes;
    sample_bytes_ += bytes;
  }

  // A str object's text (compact, the only kind code objects hold), or nothing.
  std::optional<std::string> str(const PythonInterpreter& interpreter, uint64_t address) {
    const PythonLayout& l = *interpreter.layout;
    std::vector<uint8_t> header(l.str_compact_data);
    if (!read(address, header.data(), header.size())) return std::nullopt;
    if (interpreter.str_type && word_at(header, l.object_type) != interpreter.str_type)
      return std::nullopt;
    const uint64_t length = word_at(header, l.str_length);
    const uint32_t state = static_cast<uint32_t>(word_at(header, l.str_state));
    const int kind = static_cast<int>(state >> 2 & 7);
    const bool compact = (state >> 5 & 1) != 0;
    const bool ascii = (state >> 6 & 1) != 0;
    if (!compact || (kind != 1 && kind != 2 && kind != 4) || (ascii && kind != 1) ||
        length > kMaxPlausibleCodePoints)
      return std::nullopt;
    const uint64_t code_points = std::min(length, kMaxTextCodePoints);
    std::string data(code_points * static_cast<uint64_t>(kind), '\0');
    const uint64_t start = address + (ascii ? l.str_ascii_data : l.str_compact_data);
    if (!read(start, data.data(), data.size())) return std::nullopt;
    if (!ascii) return python_text_as_utf8(data, kind);
    // Said to be ASCII: anything else would be no UTF-8 in the profile.
    if (std::any_of(data.begin(), data.end(), [](char c) { return c & 0x80; })) return std::nullopt;
    return data;
  }

  // A bytes object's contents (up to kMaxLinetableBytes), or nothing.
  std::optional<std::string> bytes(const PythonInterpreter& interpreter, uint64_t address) {
    const PythonLayout& l = *interpreter.layout;
    std::vector<uint8_t> header(l.bytes_data);
    if (!read(address, header.data(), header.size())) return std::nullopt;
    if (interpreter.bytes_type && word_at(header, l.object_type) != interpreter.bytes_type)
      return std::nullopt;
    const uint64_t size = word_at(header, l.bytes_size);
    if (size > kMaxLinetableBytes) return std::nullopt;
    std::string data(size, '\0');
    if (!read(address + l.bytes_data, data.data(), data.size())) return std::nullopt;
    return data;
  }

 private:
  ProcessMemory memory_;
  Process& process_;
  uint64_t& sample_bytes_;
};

PythonCodeResult PythonCodeReader::read(Pid pid, const PythonInterpreter& interpreter,
                                        uint64_t address, int first_line, MonotonicNs time) {
  Process& process = processes_[pid];
  if (auto it = process.codes.find(address);
      it != process.codes.end() && it->second.first_line == first_line)
    return {&it->second, PythonCodeStatus::kRead};
  if (auto it = process.failed.find(address);
      it != process.failed.end() && it->second.first_line == first_line &&
      time.value - it->second.time.value < limits_.retry_after_ns)
    return {nullptr, PythonCodeStatus::kUnreadable};
  if (process.over_budget) return {nullptr, PythonCodeStatus::kProcessBudgetUsedUp};
  if (process.objects >= limits_.objects_per_process ||
      process.bytes >= limits_.bytes_per_process) {
    // Nothing more is read: the failed addresses need no remembering.
    process.over_budget = true;
    process.failed.clear();
    ++processes_over_budget_;
    return {nullptr, PythonCodeStatus::kProcessBudgetUsedUp};
  }
  if (sample_bytes_ >= limits_.bytes_per_sample)
    return {nullptr, PythonCodeStatus::kSampleBudgetUsedUp};
  ++process.objects;
  Budgeted memory(pid, process, sample_bytes_);
  std::optional<PythonCode> code = read_uncached(memory, interpreter, address);
  if (!code) {
    if (process.failed.size() >= limits_.failed_addresses_per_process) process.failed.clear();
    process.failed[address] = {time, first_line};
    return {nullptr, PythonCodeStatus::kUnreadable};
  }
  process.failed.erase(address);
  memory.charge(code->lines.size() * sizeof(PythonLineRun));
  PythonCode& kept = process.codes[address] = std::move(*code);
  return {&kept, PythonCodeStatus::kRead};
}

void PythonCodeReader::forget(Pid pid) { processes_.erase(pid); }

std::optional<PythonCode> PythonCodeReader::read_uncached(Budgeted& memory,
                                                          const PythonInterpreter& interpreter,
                                                          uint64_t address) {
  const PythonLayout& l = *interpreter.layout;
  std::vector<uint8_t> object(l.code_size);
  if (!memory.read(address, object.data(), object.size())) return std::nullopt;
  ++objects_read_;
  // Whatever the address holds now must still be a code object.
  if (word_at(object, l.object_type) != interpreter.code_type) return std::nullopt;
  std::optional<std::string> name = memory.str(interpreter, word_at(object, l.code_qualname));
  if (!name) return std::nullopt;
  std::optional<std::string> file = memory.str(interpreter, word_at(object, l.code_filename));
  if (!file) return std::nullopt;
  int32_t first_line = 0;
  memcpy(&first_line, object.data() + l.code_first_line, sizeof(first_line));
  // Without its table the function is still named, at its first line.
  std::optional<std::string> table = memory.bytes(interpreter, word_at(object, l.code_linetable));
  return PythonCode{
      std::move(*name), std::move(*file), first_line,
      table ? python_line_runs(l.line_table, *table, first_line) : std::vector<PythonLineRun>{}};
}

}  // namespace bpfprof
