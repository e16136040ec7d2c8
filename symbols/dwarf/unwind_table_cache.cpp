#include "symbols/dwarf/unwind_table_cache.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <system_error>

#include "symbols/dwarf/unwind_spans.h"
#include "symbols/elf/elf_file.h"
#include "symbols/util/atomic_file.h"
#include "symbols/util/crc32.h"
#include "symbols/util/read_file.h"
#include "symbols/util/text.h"
#include "symbols/util/unique_handle.h"
#include "symbols/util/untrusted_file.h"

namespace bpfprof {
namespace {

constexpr char kMagic[8] = {'B', 'P', 'F', 'P', 'U', 'N', 'W', 'T'};

template <typename RuleOrRow>
bool rule_is_known(const RuleOrRow& r) {
  return r.cfa_rule <= BPFPROF_CFA_LAST_RULE && r.rbp_rule <= BPFPROF_RBP_UNKNOWN &&
         r.rbx_rule <= BPFPROF_RBP_UNKNOWN;
}

bool rows_are_valid(const std::vector<UnwindRow>& rows) {
  for (size_t i = 0; i < rows.size(); ++i)
    if ((i > 0 && rows[i].pc <= rows[i - 1].pc) || !rule_is_known(rows[i])) return false;
  return true;
}

// Pages that cover the entries in order, each page's pcs rising, rules known and indexed.
bool compact_is_valid(const CompactUnwindTable& table) {
  uint64_t next = 0;
  for (const bpfprof_unwind_page& page : table.pages) {
    if (page.first_row != next || page.row_count > table.rows.size() - next) return false;
    for (uint32_t i = page.first_row; i < page.first_row + page.row_count; ++i)
      if (table.rows[i].rule >= table.rules.size() ||
          (i > page.first_row && table.rows[i].pc_low <= table.rows[i - 1].pc_low))
        return false;
    next += page.row_count;
  }
  if (next != table.rows.size()) return false;
  for (const UnwindRule& rule : table.rules)
    if (!rule_is_known(rule)) return false;
  return true;
}

template <typename T>
void append_all(std::string& bytes, const std::vector<T>& items) {
  if (!items.empty())
    bytes.append(reinterpret_cast<const char*>(items.data()), items.size() * sizeof(T));
}

// `count` items of T from the front of `bytes` (moved past them).
template <typename T>
std::vector<T> take_all(std::string_view& bytes, size_t count) {
  std::vector<T> items(count);
  if (count) std::memcpy(items.data(), bytes.data(), count * sizeof(T));
  bytes.remove_prefix(count * sizeof(T));
  return items;
}

size_t compact_size(const CompactUnwindTable& table) {
  return table.pages.size() * sizeof(table.pages[0]) + table.rows.size() * sizeof(table.rows[0]) +
         table.rules.size() * sizeof(table.rules[0]);
}

void append_compact(std::string& bytes, const CompactUnwindTable& table) {
  append_all(bytes, table.pages);
  append_all(bytes, table.rows);
  append_all(bytes, table.rules);
}

// The bytes of the pages, entries and rules that a compact section's header counts.
uint64_t compact_bytes(const UnwindCacheCompactHeader& header) {
  return uint64_t{header.page_count} * sizeof(bpfprof_unwind_page) +
         uint64_t{header.entry_count} * sizeof(bpfprof_unwind_entry) +
         uint64_t{header.rule_count} * sizeof(UnwindRule);
}

// The compact section after the rows; nullopt (the file is bad) or a table or none.
std::optional<std::optional<CompactUnwindTable>> parse_compact(std::string_view bytes) {
  UnwindCacheCompactHeader header;
  if (bytes.size() < sizeof header) return std::nullopt;
  std::memcpy(&header, bytes.data(), sizeof header);
  bytes.remove_prefix(sizeof header);
  if (!header.present) {  // then nothing else, as written
    const UnwindCacheCompactHeader none{};
    if (std::memcmp(&header, &none, sizeof header) != 0 || !bytes.empty()) return std::nullopt;
    return std::optional<CompactUnwindTable>{};
  }
  if (header.present != 1 || compact_bytes(header) != bytes.size() ||
      crc32_of(bytes.data(), bytes.size()) != header.crc32)
    return std::nullopt;
  CompactUnwindTable table;
  table.page_base = header.page_base;
  table.pages = take_all<bpfprof_unwind_page>(bytes, header.page_count);
  table.rows = take_all<bpfprof_unwind_entry>(bytes, header.entry_count);
  table.rules = take_all<UnwindRule>(bytes, header.rule_count);
  if (!compact_is_valid(table)) return std::nullopt;
  return std::optional<CompactUnwindTable>(std::move(table));
}

// A header this build writes, whose rows fit in the `after` bytes that follow it.
bool header_is_valid(const UnwindCacheHeader& header, uint64_t after) {
  return std::memcmp(header.magic, kMagic, sizeof kMagic) == 0 &&
         header.version == kUnwindCacheVersion && header.row_size == sizeof(UnwindRow) &&
         header.reserved == 0 && header.row_count <= after / sizeof(UnwindRow);
}

// `items` (sized) read from `offset` on, which moves past them; their bytes' CRC into `crc`.
template <typename T>
bool read_items(int fd, std::vector<T>& items, uint64_t& offset, uint32_t& crc) {
  const size_t size = items.size() * sizeof(T);
  if (size && !pread_exact(fd, items.data(), size, offset)) return false;
  crc = crc32_of(items.data(), size, crc);
  offset += size;
  return true;
}

// The compact form of the entry open as `fd` (`size` bytes), its rows skipped; nullopt when it
// has none or it fails a check.
std::optional<ParsedUnwindTable> read_compact_only(int fd, uint64_t size) {
  UnwindCacheHeader header;
  if (size < sizeof header || !pread_exact(fd, &header, sizeof header, 0) ||
      !header_is_valid(header, size - sizeof header))
    return std::nullopt;
  if (header.row_count != 0) return std::nullopt;  // rows come only without a compact form
  uint64_t offset = sizeof header;
  UnwindCacheCompactHeader compact;
  if (size - offset < sizeof compact || !pread_exact(fd, &compact, sizeof compact, offset) ||
      compact.present != 1)
    return std::nullopt;
  offset += sizeof compact;
  if (compact_bytes(compact) != size - offset) return std::nullopt;
  CompactUnwindTable table;
  table.page_base = compact.page_base;
  table.pages.resize(compact.page_count);
  table.rows.resize(compact.entry_count);
  table.rules.resize(compact.rule_count);
  uint32_t crc = 0;
  if (!read_items(fd, table.pages, offset, crc) || !read_items(fd, table.rows, offset, crc) ||
      !read_items(fd, table.rules, offset, crc) || crc != compact.crc32 || !compact_is_valid(table))
    return std::nullopt;
  ParsedUnwindTable parsed;
  parsed.compact = std::move(table);
  parsed.row_count = header.row_count;
  return parsed;
}

// The key of the file open as `fd`: its build-id, else what identifies this version of it.
std::optional<std::string> cache_key(int fd) {
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) return std::nullopt;
  const std::vector<uint8_t> build_id = read_elf_build_id(fd);
  if (!build_id.empty()) return hex_string(build_id) + ".tbl";
  const int64_t mtime_ns = int64_t{st.st_mtim.tv_sec} * 1000000000 + st.st_mtim.tv_nsec;
  return "f-" + std::to_string(st.st_dev) + "-" + std::to_string(st.st_ino) + "-" +
         std::to_string(st.st_size) + "-" + std::to_string(mtime_ns) + ".tbl";
}

}  // namespace

std::string serialize_unwind_table(const std::vector<UnwindRow>& all_rows,
                                   const std::optional<CompactUnwindTable>& compact) {
  // The rows only where there is no compact form: nothing reads them back then, and they were
  // four fifths of an entry's bytes and of the time its store took.
  static const std::vector<UnwindRow> kNone;
  const std::vector<UnwindRow>& rows = compact ? kNone : all_rows;
  UnwindCacheHeader header{};
  std::memcpy(header.magic, kMagic, sizeof kMagic);
  header.version = kUnwindCacheVersion;
  header.row_size = sizeof(UnwindRow);
  header.row_count = rows.size();
  header.rows_crc32 = crc32_of(rows.data(), rows.size() * sizeof(UnwindRow));
  // Sized once: a large table is tens of MB, which growing by appends copies several times.
  std::string bytes;
  bytes.reserve(sizeof header + rows.size() * sizeof(UnwindRow) + sizeof(UnwindCacheCompactHeader) +
                (compact ? compact_size(*compact) : 0));
  bytes.append(reinterpret_cast<const char*>(&header), sizeof header);
  append_all(bytes, rows);
  UnwindCacheCompactHeader compact_header{};
  const size_t compact_at = bytes.size() + sizeof compact_header;
  bytes.append(reinterpret_cast<const char*>(&compact_header), sizeof compact_header);
  if (!compact) return bytes;
  append_compact(bytes, *compact);
  compact_header = {1,
                    compact->page_base,
                    static_cast<uint32_t>(compact->pages.size()),
                    static_cast<uint32_t>(compact->rows.size()),
                    static_cast<uint32_t>(compact->rules.size()),
                    crc32_of(bytes.data() + compact_at, bytes.size() - compact_at)};
  bytes.replace(compact_at - sizeof compact_header, sizeof compact_header,
                reinterpret_cast<const char*>(&compact_header), sizeof compact_header);
  return bytes;
}

std::string serialize_unwind_rows(const std::vector<UnwindRow>& rows) {
  return serialize_unwind_table(rows, compact_unwind_table(rows));
}

std::optional<ParsedUnwindTable> parse_unwind_table(std::string_view bytes) {
  UnwindCacheHeader header;
  if (bytes.size() < sizeof header) return std::nullopt;
  std::memcpy(&header, bytes.data(), sizeof header);
  bytes.remove_prefix(sizeof header);
  if (!header_is_valid(header, bytes.size())) return std::nullopt;
  const std::string_view row_bytes = bytes.substr(0, header.row_count * sizeof(UnwindRow));
  if (crc32_of(row_bytes.data(), row_bytes.size()) != header.rows_crc32) return std::nullopt;
  ParsedUnwindTable table;
  table.row_count = header.row_count;
  table.rows = take_all<UnwindRow>(bytes, header.row_count);
  if (!rows_are_valid(table.rows)) return std::nullopt;
  std::optional<std::optional<CompactUnwindTable>> compact = parse_compact(bytes);
  // Rows only without a compact form, as written: one table, one entry.
  if (!compact || (*compact && !table.rows.empty())) return std::nullopt;
  table.compact = std::move(*compact);
  return table;
}

std::optional<std::vector<UnwindRow>> parse_unwind_rows(std::string_view bytes) {
  std::optional<ParsedUnwindTable> table = parse_unwind_table(bytes);
  if (!table) return std::nullopt;
  return std::move(table->rows);
}

std::optional<ParsedUnwindTable> read_unwind_table(int fd, uint64_t size, TableForm form) {
  if (form == TableForm::kCompactFirst)
    if (std::optional<ParsedUnwindTable> compact = read_compact_only(fd, size)) return compact;
  std::string bytes(size, '\0');
  if (!pread_exact(fd, bytes.data(), bytes.size(), 0)) return std::nullopt;
  return parse_unwind_table(bytes);
}

std::string UnwindTableCache::default_directory() {
  const char* configured = std::getenv("BPFPROF_CACHE_DIR");
  if (configured != nullptr && *configured != '\0') return configured;
  return "/var/cache/bpfprof/unwind-v" + std::to_string(kUnwindCacheVersion);
}

UnwindTableCache::UnwindTableCache(std::string directory, UnwindTableOptions options)
    : directory_(std::move(directory)), options_(std::move(options)) {}

CachedUnwindTableResult UnwindTableCache::get(const std::string& path, int fd, OnCacheMiss miss,
                                              TableForm form) {
  const std::chrono::nanoseconds start = UnwindBudget::thread_cpu_time();
  UniqueFd own;
  if (fd < 0) {
    own = open_untrusted(path, UntrustedKind::kBinary).fd;
    fd = own.get();
  }
  const std::optional<std::string> key = fd >= 0 ? cache_key(fd) : std::nullopt;
  if (!key) return UnwindTableError::kUnreadable;
  // A user's file may claim the build-id of a file whose table it would replace for everyone.
  const bool cacheable = written_by_us_or_root_only(fd);
  if (cacheable) {
    const UntrustedOpen entry =
        open_untrusted(directory_ + "/" + *key, UntrustedKind::kUnwindCache);
    if (entry.fd) {
      if (std::optional<ParsedUnwindTable> parsed =
              read_unwind_table(entry.fd.get(), entry.size, form)) {
        const uint64_t unread = parsed->rows.empty() ? parsed->row_count : 0;
        return CachedUnwindTable{std::move(parsed->rows),
                                 std::move(parsed->compact),
                                 UnwindTableSource::kCache,
                                 UnwindBudget::thread_cpu_time() - start,
                                 *key,
                                 std::nullopt,
                                 unread};
      }
    }
  }
  if (miss == OnCacheMiss::kReport) return UnwindTableError::kNotInCache;
  UnwindTableResult built = build_unwind_table(path, options_, fd);
  if (const auto* error = std::get_if<UnwindTableError>(&built)) return *error;
  UnwindTable& table = std::get<UnwindTable>(built);
  std::optional<CompactUnwindTable> compact = compact_unwind_table(table.rows);
  CachedUnwindTable result{
      std::move(table.rows),
      std::move(compact),
      cacheable ? UnwindTableSource::kBuilt : UnwindTableSource::kBuiltUncached,
      UnwindBudget::thread_cpu_time() - start,
      cacheable ? *key : "",
      std::move(table.coverage),
      0};
  if (cacheable && !store(*key, result)) result.source = UnwindTableSource::kBuiltNotStored;
  return result;
}

// A reader sees the old entry or the whole new one. Entries are 0644 whatever the umask
// (the cache is shared); no fsync: an entry cut short by a crash fails its checks on load
// and is rebuilt.
bool UnwindTableCache::store(const std::string& key, const CachedUnwindTable& table) {
  last_error_.clear();
  if (!make_directories(directory_, last_error_)) return false;
  try {
    AtomicReplaceFile file(directory_ + "/" + key, {.exact_mode = 0644, .durable = false});
    file.write_all(serialize_unwind_table(table.rows, table.compact));
    file.commit();
    return true;
  } catch (const std::runtime_error& e) {
    last_error_ = e.what();
    return false;
  }
}

}  // namespace bpfprof
