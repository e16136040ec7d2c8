#include "symbols/util/proc_maps.h"

#include <charconv>

#include "symbols/util/read_file.h"

namespace bpfprof {
namespace {

constexpr std::string_view kDeletedSuffix = " (deleted)";

// A forward-only reader over one maps line. Every parse step returns false on mismatch so
// the caller can drop the line.
class LineCursor {
 public:
  explicit LineCursor(std::string_view line) : rest_(line) {}

  bool parse_number(uint64_t& value, int base) {
    const char* begin = rest_.data();
    const char* end = rest_.data() + rest_.size();
    auto [stop, error] = std::from_chars(begin, end, value, base);
    if (error != std::errc{} || stop == begin) return false;  // includes overflow
    rest_.remove_prefix(static_cast<size_t>(stop - begin));
    return true;
  }

  bool parse_u32(uint32_t& value, int base) {
    uint64_t wide = 0;
    if (!parse_number(wide, base) || wide > UINT32_MAX) return false;
    value = static_cast<uint32_t>(wide);
    return true;
  }

  bool expect(char c) {
    if (rest_.empty() || rest_.front() != c) return false;
    rest_.remove_prefix(1);
    return true;
  }

  // At least one space is required between fields.
  bool skip_spaces() {
    const size_t count = rest_.find_first_not_of(' ');
    if (count == 0) return false;
    rest_.remove_prefix(count == std::string_view::npos ? rest_.size() : count);
    return true;
  }

  bool take(size_t count, std::string_view& taken) {
    if (rest_.size() < count) return false;
    taken = rest_.substr(0, count);
    rest_.remove_prefix(count);
    return true;
  }

  bool at_end() const { return rest_.empty(); }
  std::string_view rest() const { return rest_; }

 private:
  std::string_view rest_;
};

bool parse_permissions(std::string_view perms, MapEntry& entry) {
  auto flag = [](char actual, char set, bool& out) {
    if (actual == set) {
      out = true;
      return true;
    }
    out = false;
    return actual == '-';
  };
  if (!flag(perms[0], 'r', entry.readable) || !flag(perms[1], 'w', entry.writable) ||
      !flag(perms[2], 'x', entry.executable)) {
    return false;
  }
  if (perms[3] != 'p' && perms[3] != 's') return false;
  entry.is_private = perms[3] == 'p';
  return true;
}

// Format (fs/proc/task_mmu.c): "start-end perms offset major:minor inode [padding path]".
std::optional<MapEntry> parse_maps_line(std::string_view line) {
  MapEntry entry;
  LineCursor cursor(line);
  std::string_view perms;
  if (!cursor.parse_number(entry.start, 16) || !cursor.expect('-') ||
      !cursor.parse_number(entry.end, 16) || !cursor.skip_spaces() || !cursor.take(4, perms) ||
      !parse_permissions(perms, entry) || !cursor.skip_spaces() ||
      !cursor.parse_number(entry.file_offset, 16) || !cursor.skip_spaces() ||
      !cursor.parse_u32(entry.dev_major, 16) || !cursor.expect(':') ||
      !cursor.parse_u32(entry.dev_minor, 16)) {
    return std::nullopt;
  }
  if (!cursor.skip_spaces() || !cursor.parse_number(entry.inode, 10)) return std::nullopt;
  if (entry.start >= entry.end) return std::nullopt;

  if (!cursor.at_end()) {
    // The path is everything after the padding, spaces included.
    if (!cursor.skip_spaces()) return std::nullopt;  // e.g. "123abc": inode run into junk
    entry.path = std::string(cursor.rest());
  }
  return entry;
}

}  // namespace

bool MapEntry::is_deleted() const {
  return path.size() > kDeletedSuffix.size() && path.ends_with(kDeletedSuffix);
}

std::string_view MapEntry::path_without_deleted_suffix() const {
  std::string_view view = path;
  if (is_deleted()) view.remove_suffix(kDeletedSuffix.size());
  return view;
}

std::vector<MapEntry> parse_proc_maps(std::string_view text) {
  std::vector<MapEntry> entries;
  while (!text.empty()) {
    const size_t newline = text.find('\n');
    const std::string_view line = text.substr(0, newline);
    text.remove_prefix(newline == std::string_view::npos ? text.size() : newline + 1);
    if (auto entry = parse_maps_line(line)) entries.push_back(std::move(*entry));
  }
  return entries;
}

std::optional<std::vector<MapEntry>> read_proc_maps(int pid) {
  if (pid <= 0) return std::nullopt;
  auto text = read_entire_file("/proc/" + std::to_string(pid) + "/maps");
  if (!text) return std::nullopt;
  return parse_proc_maps(*text);
}

}  // namespace bpfprof
