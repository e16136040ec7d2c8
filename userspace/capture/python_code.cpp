#include "userspace/capture/python_code.h"

#include <sys/uio.h>

#include <cstring>
#include <vector>

namespace bpfprof {

namespace {

// Names and file paths longer than this are cut: a str whose header was overwritten (the
// object freed while being read) must not make us read megabytes.
constexpr uint64_t kMaxTextCodePoints = 4096;
// Location tables grow with a function's size: 1 MiB is a function of ~100k instructions.
constexpr uint64_t kMaxLinetableBytes = 1 << 20;

bool read_memory(Pid pid, uint64_t address, void* out, size_t size) {
  iovec local{out, size};
  iovec remote{reinterpret_cast<void*>(address), size};
  return process_vm_readv(pid.value, &local, 1, &remote, 1, 0) == static_cast<ssize_t>(size);
}

uint64_t word_at(const std::vector<uint8_t>& bytes, uint32_t offset) {
  uint64_t value = 0;
  if (offset + sizeof(value) <= bytes.size()) memcpy(&value, bytes.data() + offset, sizeof(value));
  return value;
}

// A compact str object's text (the only kind code objects hold), or nothing.
std::optional<std::string> read_str(Pid pid, const PythonLayout& l, uint64_t address) {
  std::vector<uint8_t> header(l.str_compact_data);
  if (!address || !read_memory(pid, address, header.data(), header.size())) return std::nullopt;
  const uint64_t length = word_at(header, l.str_length);
  const uint32_t state = static_cast<uint32_t>(word_at(header, l.str_state));
  const int kind = static_cast<int>(state >> 2 & 7);
  const bool compact = (state >> 5 & 1) != 0;
  const bool ascii = (state >> 6 & 1) != 0;
  if (!compact || (kind != 1 && kind != 2 && kind != 4)) return std::nullopt;
  const uint64_t code_points = std::min(length, kMaxTextCodePoints);
  std::string data(code_points * static_cast<uint64_t>(kind), '\0');
  const uint64_t start = address + (ascii ? l.str_ascii_data : l.str_compact_data);
  if (!read_memory(pid, start, data.data(), data.size())) return std::nullopt;
  return ascii ? data : python_text_as_utf8(data, kind);
}

std::optional<std::string> read_bytes(Pid pid, const PythonLayout& l, uint64_t address) {
  std::vector<uint8_t> header(l.bytes_data);
  if (!address || !read_memory(pid, address, header.data(), header.size())) return std::nullopt;
  const uint64_t size = word_at(header, l.bytes_size);
  if (size > kMaxLinetableBytes) return std::nullopt;
  std::string data(size, '\0');
  if (!read_memory(pid, address + l.bytes_data, data.data(), data.size())) return std::nullopt;
  return data;
}

void append_utf8(std::string& out, uint32_t c) {
  if (c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) c = 0xFFFD;  // lone surrogates, garbage
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xC0 | c >> 6);
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out += static_cast<char>(0xE0 | c >> 12);
    out += static_cast<char>(0x80 | (c >> 6 & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | c >> 18);
    out += static_cast<char>(0x80 | (c >> 12 & 0x3F));
    out += static_cast<char>(0x80 | (c >> 6 & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  }
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

}  // namespace

std::string python_text_as_utf8(std::string_view data, int kind) {
  std::string out;
  const size_t width = static_cast<size_t>(kind);
  for (size_t i = 0; i + width <= data.size(); i += width) {
    uint32_t c = 0;
    memcpy(&c, data.data() + i, width);  // little-endian, as the machine stores it
    append_utf8(out, c);
  }
  return out;
}

std::optional<uint32_t> python_line_for(std::string_view linetable, int first_line,
                                        uint32_t code_unit) {
  LinetableReader r(linetable);
  int64_t line = first_line;
  uint64_t start = 0;
  while (!r.done()) {
    const uint8_t first = r.byte();
    if (!(first & 0x80)) return std::nullopt;  // not the start of an entry: not a 3.11 table
    const int code = first >> 3 & 15;
    const uint32_t length = (first & 7) + 1u;
    bool has_line = true;
    if (code == 15) {
      has_line = false;  // no location
    } else if (code == 14) {
      line += r.svarint();  // long form: then end line, column, end column
      r.varint();
      r.varint();
      r.varint();
    } else if (code == 13) {
      line += r.svarint();  // no columns
    } else if (code >= 10) {
      line += code - 10;  // one-line forms: column and end column bytes
      r.skip(2);
    } else {
      r.skip(1);  // short forms: same line, one column byte
    }
    if (code_unit < start + length) {
      if (!has_line || line <= 0) return std::nullopt;
      return static_cast<uint32_t>(line);
    }
    start += length;
  }
  return std::nullopt;
}

const PythonCode* PythonCodeReader::read(Pid pid, const PythonInterpreter& interpreter,
                                         uint64_t address, int first_line) {
  auto& of_process = cache_[pid];
  auto it = of_process.find(address);
  if (it != of_process.end() && it->second.first_line == first_line) return &it->second;
  std::optional<PythonCode> code = read_uncached(pid, interpreter, address);
  if (!code) return nullptr;
  return &(of_process[address] = std::move(*code));
}

void PythonCodeReader::forget(Pid pid) { cache_.erase(pid); }

std::optional<PythonCode> PythonCodeReader::read_uncached(Pid pid,
                                                          const PythonInterpreter& interpreter,
                                                          uint64_t address) {
  const PythonLayout& l = *interpreter.layout;
  std::vector<uint8_t> object(l.code_instructions);
  if (!read_memory(pid, address, object.data(), object.size())) return std::nullopt;
  ++objects_read_;
  // Whatever the address holds now must still be a code object.
  if (word_at(object, l.object_type) != interpreter.code_type) return std::nullopt;
  std::optional<std::string> name = read_str(pid, l, word_at(object, l.code_qualname));
  std::optional<std::string> file = read_str(pid, l, word_at(object, l.code_filename));
  std::optional<std::string> table = read_bytes(pid, l, word_at(object, l.code_linetable));
  if (!name || !file) return std::nullopt;
  int32_t first_line = 0;
  memcpy(&first_line, object.data() + l.code_first_line, sizeof(first_line));
  return PythonCode{std::move(*name), std::move(*file), first_line,
                    table ? std::move(*table) : std::string()};
}

}  // namespace bpfprof
