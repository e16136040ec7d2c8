#include "symbols/kernel/kallsyms.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <span>
#include <tuple>

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

// kallsyms read a line at a time: each text symbol's name goes into the names at once, and a
// small record of it is kept for the sort by address (the whole file and a record with two
// strings per line took 20 MB for a moment).
class KernelSymbols::Builder {
 public:
  // `wanted` (sorted, unique; empty: every symbol): the addresses to name.
  explicit Builder(std::span<const uint64_t> wanted = {})
      : wanted_(wanted), at_or_below_(wanted.size()), above_(wanted.size()) {}

  void add_line(std::string_view text_line) {
    const std::optional<KallsymsLine> line = parse_kallsyms_line(text_line);
    if (!line) return;
    saw_any_line_ = true;
    saw_nonzero_address_ |= line->address != 0;
    if (!is_text_type(line->type)) return;
    if (line->name.size() > UINT16_MAX || result_.names_.size() > UINT32_MAX - line->name.size())
      return;  // longer than any kernel's (KSYM_NAME_LEN), or past what an entry can point at
    const std::optional<uint16_t> module = result_.module_index(line->module, last_module_);
    if (!module) return;
    last_module_ = *module;
    if (line->module.empty()) note_text_start(*line);
    uint64_t& lowest = result_.module_lowest_[*module];
    if (!lowest || line->address < lowest) lowest = line->address;
    Candidate candidate{line->address, alias_rank(line->type, line->name), line_count_++, *module,
                        line->name};
    if (wanted_.empty())
      keep(candidate);
    else
      offer(candidate);
  }

  KernelSymbols finish() && {
    result_.addresses_hidden_ = saw_any_line_ && !saw_nonzero_address_;
    if (result_.addresses_hidden_) {
      KernelSymbols hidden;
      hidden.addresses_hidden_ = true;
      return hidden;
    }
    result_.text_start_ = text_ ? text_ : stext_ ? stext_ : lowest_vmlinux_text_;
    if (!wanted_.empty()) keep_nearest();
    // Among aliases at one address the best display name sorts first; ties keep file order.
    std::sort(pending_.begin(), pending_.end(), [](const Pending& a, const Pending& b) {
      return std::tie(a.address, a.alias_rank, a.line) < std::tie(b.address, b.alias_rank, b.line);
    });
    result_.entries_.reserve(pending_.size());
    for (const Pending& p : pending_)
      if (result_.entries_.empty() || result_.entries_.back().address != p.address)
        result_.entries_.push_back({p.address, p.name_offset, p.name_size, p.module});
    result_.entries_.shrink_to_fit();
    result_.names_.shrink_to_fit();
    return std::move(result_);
  }

 private:
  struct Pending {
    uint64_t address;
    uint32_t name_offset;
    uint16_t name_size;
    uint16_t module;
    uint8_t alias_rank;
    uint32_t line;
  };

  // A line, or the nearest to a wanted address so far: its address, then its name's
  // preference among aliases and its place in the file.
  struct Candidate {
    uint64_t address = 0;
    uint8_t alias_rank = 0;
    uint32_t line = 0;
    uint16_t module = 0;
    std::string_view name;  // in the line read, until kept
    bool precedes(const Candidate& other) const {
      return std::tie(alias_rank, line) < std::tie(other.alias_rank, other.line);
    }
  };
  struct Nearest {
    std::optional<Candidate> candidate;
    std::string name;
  };

  void keep(const Candidate& c) {
    pending_.push_back({c.address, static_cast<uint32_t>(result_.names_.size()),
                        static_cast<uint16_t>(c.name.size()), c.module, c.alias_rank, c.line});
    result_.names_.append(c.name);
  }

  // The symbols a wanted address needs: the nearest at or below it (its name) and the nearest
  // above (its end). A line is offered to the slot of the first wanted address at or above it
  // and to that of the last one below; each address's nearest are then found over the slots
  // before and after it.
  void offer(const Candidate& c) {
    const size_t first_at_or_above =
        std::lower_bound(wanted_.begin(), wanted_.end(), c.address) - wanted_.begin();
    if (first_at_or_above < wanted_.size())
      consider(at_or_below_[first_at_or_above], c, [](uint64_t a, uint64_t b) { return a > b; });
    if (first_at_or_above > 0)
      consider(above_[first_at_or_above - 1], c, [](uint64_t a, uint64_t b) { return a < b; });
  }

  template <typename Nearer>
  static void consider(Nearest& slot, const Candidate& c, Nearer nearer) {
    const std::optional<Candidate>& now = slot.candidate;
    if (now && !nearer(c.address, now->address) && !(c.address == now->address && c.precedes(*now)))
      return;
    slot.candidate = c;
    slot.name.assign(c.name);
  }

  void keep_nearest() {
    const Nearest* below = nullptr;
    for (const Nearest& slot : at_or_below_) {
      if (slot.candidate && (!below || slot.candidate->address > below->candidate->address))
        keep_named(*(below = &slot));
    }
    const Nearest* above = nullptr;
    for (auto slot = above_.rbegin(); slot != above_.rend(); ++slot) {
      if (slot->candidate && (!above || slot->candidate->address < above->candidate->address))
        keep_named(*(above = &*slot));
    }
  }

  void keep_named(const Nearest& nearest) {
    Candidate c = *nearest.candidate;
    c.name = nearest.name;
    keep(c);
  }

  void note_text_start(const KallsymsLine& line) {
    if (line.name == "_text" && !text_) text_ = line.address;
    if (line.name == "_stext" && !stext_) stext_ = line.address;
    if (!lowest_vmlinux_text_ || line.address < lowest_vmlinux_text_)
      lowest_vmlinux_text_ = line.address;
  }

  std::span<const uint64_t> wanted_;
  std::vector<Nearest> at_or_below_;
  std::vector<Nearest> above_;
  KernelSymbols result_;
  std::vector<Pending> pending_;
  uint16_t last_module_ = 0;
  uint32_t line_count_ = 0;
  bool saw_any_line_ = false;
  bool saw_nonzero_address_ = false;
  uint64_t text_ = 0;
  uint64_t stext_ = 0;
  uint64_t lowest_vmlinux_text_ = 0;
};

KernelSymbols KernelSymbols::parse(std::string_view text) {
  Builder builder;
  while (!text.empty()) {
    const size_t newline = text.find('\n');
    builder.add_line(text.substr(0, newline));
    text.remove_prefix(newline == std::string_view::npos ? text.size() : newline + 1);
  }
  return std::move(builder).finish();
}

std::optional<KernelSymbols> KernelSymbols::load(const std::string& path,
                                                 std::span<const uint64_t> wanted) {
  std::unique_ptr<FILE, decltype(&fclose)> file(fopen(path.c_str(), "re"), &fclose);
  if (!file) return std::nullopt;
  Builder builder(wanted);
  char* line = nullptr;
  size_t capacity = 0;
  for (ssize_t length; (length = getline(&line, &capacity, file.get())) >= 0;) {
    std::string_view text(line, static_cast<size_t>(length));
    if (!text.empty() && text.back() == '\n') text.remove_suffix(1);
    builder.add_line(text);
  }
  const bool failed = ferror(file.get()) != 0;
  free(line);
  if (failed) return std::nullopt;
  return std::move(builder).finish();
}

// Modules come one after the other in the file: the last line's (`last`) is the likely one.
std::optional<uint16_t> KernelSymbols::module_index(std::string_view module, uint16_t last) {
  if (module.empty()) return 0;
  if (modules_[last] == module) return last;
  for (size_t i = 1; i < modules_.size(); ++i)
    if (modules_[i] == module) return static_cast<uint16_t>(i);
  if (modules_.size() > UINT16_MAX) return std::nullopt;
  modules_.emplace_back(module);
  module_lowest_.push_back(0);
  return static_cast<uint16_t>(modules_.size() - 1);
}

std::optional<uint64_t> KernelSymbols::module_base(std::string_view module) const {
  for (size_t i = 1; i < modules_.size(); ++i)
    if (modules_[i] == module) return module_lowest_[i];
  return std::nullopt;
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
