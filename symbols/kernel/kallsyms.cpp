#include "symbols/kernel/kallsyms.h"

#include <algorithm>
#include <charconv>
#include <tuple>

#include "symbols/util/read_file.h"

namespace bpfprof {
namespace {

// kallsyms has no sizes, so the last symbol before a module boundary (or at the very end)
// would otherwise swallow the whole gap up to the next module; bound it instead.
constexpr uint64_t kMaxSpanAtModuleEnd = 64 * 1024;

struct KallsymsLine {
  uint64_t address;
  std::string_view name;
  std::string_view module;
  char type;
  // Sort key beyond the address, computed once: display-name preference among aliases,
  // then file order.
  uint8_t alias_rank;
  uint32_t line_index;
};

// "ffffffff81000000 T _text" or "ffffffffc0a01000 t fn\t[module]".
std::optional<KallsymsLine> parse_kallsyms_line(std::string_view line) {
  KallsymsLine parsed{};
  const char* begin = line.data();
  const char* end = line.data() + line.size();
  auto [after_address, error] = std::from_chars(begin, end, parsed.address, 16);
  if (error != std::errc{} || after_address == begin) return std::nullopt;

  std::string_view rest(after_address, static_cast<size_t>(end - after_address));
  if (rest.size() < 4 || rest[0] != ' ' || rest[2] != ' ') return std::nullopt;
  parsed.type = rest[1];
  rest.remove_prefix(3);

  const size_t tab = rest.find('\t');
  parsed.name = rest.substr(0, tab);
  if (parsed.name.empty() || parsed.name.find(' ') != std::string_view::npos) return std::nullopt;
  if (tab != std::string_view::npos) {
    std::string_view module = rest.substr(tab + 1);
    if (module.size() < 2 || module.front() != '[' || module.back() != ']') return std::nullopt;
    parsed.module = module.substr(1, module.size() - 2);
  }
  return parsed;
}

bool is_text_type(char type) { return type == 't' || type == 'T' || type == 'w' || type == 'W'; }

// Display-name preference among aliases: global, then weak, then local symbols; within
// those, names with fewer leading underscores (startup_64 over _text).
uint8_t alias_rank(char type, std::string_view name) {
  int type_rank = 3;  // 'w'
  switch (type) {
    case 'T':
      type_rank = 0;
      break;
    case 'W':
      type_rank = 1;
      break;
    case 't':
      type_rank = 2;
      break;
  }
  const size_t underscores = std::min<size_t>(name.find_first_not_of('_'), 15);
  return static_cast<uint8_t>(type_rank * 16 + underscores);
}

}  // namespace

KernelSymbols KernelSymbols::parse(std::string_view text) {
  KernelSymbols result;
  std::vector<KallsymsLine> text_lines;
  text_lines.reserve(text.size() / 40);  // typical line length, avoids regrowth
  bool saw_any_line = false;
  bool saw_nonzero_address = false;

  while (!text.empty()) {
    const size_t newline = text.find('\n');
    const std::string_view line = text.substr(0, newline);
    text.remove_prefix(newline == std::string_view::npos ? text.size() : newline + 1);
    const std::optional<KallsymsLine> parsed = parse_kallsyms_line(line);
    if (!parsed) continue;
    saw_any_line = true;
    saw_nonzero_address |= parsed->address != 0;
    if (!is_text_type(parsed->type)) continue;
    KallsymsLine& kept = text_lines.emplace_back(*parsed);
    kept.alias_rank = alias_rank(kept.type, kept.name);
    kept.line_index = static_cast<uint32_t>(text_lines.size());
  }

  result.addresses_hidden_ = saw_any_line && !saw_nonzero_address;
  if (result.addresses_hidden_) return result;

  // Among aliases at one address the best display name sorts first; ties keep file order.
  std::sort(text_lines.begin(), text_lines.end(), [](const KallsymsLine& a, const KallsymsLine& b) {
    return std::tie(a.address, a.alias_rank, a.line_index) <
           std::tie(b.address, b.alias_rank, b.line_index);
  });

  uint64_t stext = 0;
  uint64_t lowest_vmlinux_text = 0;
  for (const KallsymsLine& line : text_lines) {
    if (!line.module.empty()) continue;
    if (line.name == "_text" && result.text_start_ == 0) result.text_start_ = line.address;
    if (line.name == "_stext" && stext == 0) stext = line.address;
    if (lowest_vmlinux_text == 0) lowest_vmlinux_text = line.address;  // sorted: first wins
  }
  if (result.text_start_ == 0) result.text_start_ = stext != 0 ? stext : lowest_vmlinux_text;

  result.entries_.reserve(text_lines.size());
  for (const KallsymsLine& line : text_lines) result.keep(line.address, line.name, line.module);
  result.entries_.shrink_to_fit();
  result.names_.shrink_to_fit();
  return result;
}

std::optional<KernelSymbols> KernelSymbols::load(const std::string& path) {
  std::optional<std::string> text = read_entire_file(path);
  if (!text) return std::nullopt;
  return parse(*text);
}

// One symbol an address: the first of those sorted there.
void KernelSymbols::keep(uint64_t address, std::string_view name, std::string_view module) {
  if (!entries_.empty() && entries_.back().address == address) return;
  // Longer than any kernel's (KSYM_NAME_LEN), or past what an entry can point at.
  if (name.size() > UINT16_MAX || names_.size() > UINT32_MAX - name.size()) return;
  const std::optional<uint16_t> module_at = module_index(module);
  if (!module_at) return;
  entries_.push_back({address, static_cast<uint32_t>(names_.size()),
                      static_cast<uint16_t>(name.size()), *module_at});
  names_.append(name);
}

// Modules come one after the other in address order: the last entry's is the likely one.
std::optional<uint16_t> KernelSymbols::module_index(std::string_view module) {
  if (module.empty()) return 0;
  if (!entries_.empty() && modules_[entries_.back().module] == module)
    return entries_.back().module;
  for (size_t i = 1; i < modules_.size(); ++i)
    if (modules_[i] == module) return static_cast<uint16_t>(i);
  if (modules_.size() > UINT16_MAX) return std::nullopt;
  modules_.emplace_back(module);
  return static_cast<uint16_t>(modules_.size() - 1);
}

uint64_t KernelSymbols::end_of(size_t index) const {
  const Entry& symbol = entries_[index];
  const uint64_t capped_end =
      symbol.address + std::min<uint64_t>(kMaxSpanAtModuleEnd, ~symbol.address);
  if (index + 1 == entries_.size()) return capped_end;
  const Entry& next = entries_[index + 1];
  return next.module != symbol.module ? std::min(next.address, capped_end) : next.address;
}

KernelSymbol KernelSymbols::operator[](size_t index) const {
  const Entry& e = entries_[index];
  return KernelSymbol{e.address, end_of(index),
                      std::string_view(names_).substr(e.name_offset, e.name_size),
                      modules_[e.module]};
}

std::optional<KernelSymbol> KernelSymbols::lookup(uint64_t addr) const {
  auto after = std::upper_bound(entries_.begin(), entries_.end(), addr,
                                [](uint64_t value, const Entry& e) { return value < e.address; });
  if (after == entries_.begin()) return std::nullopt;
  const size_t index = static_cast<size_t>(std::prev(after) - entries_.begin());
  if (addr >= end_of(index)) return std::nullopt;
  return (*this)[index];
}

}  // namespace bpfprof
