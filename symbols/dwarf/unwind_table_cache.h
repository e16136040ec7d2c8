// Unwind tables (unwind_table.h) cached across runs, one file per ELF file, so a file is
// analysed once per machine rather than once per recording.
//
// Where: $BPFPROF_CACHE_DIR if set, else /var/cache/bpfprof/unwind-v<kUnwindCacheVersion>
// (directories made 0755, files 0644). Key: the file's GNU build-id ("<hex>.tbl"), else its device,
// inode, size and modification time ("f-<dev>-<ino>-<size>-<mtime ns>.tbl"), so a rebuilt binary at
// the same path gets a new entry. Files are written to a temporary name and renamed, and every load
// is checked (magic, version, row size and count, CRC-32, sorted rows, known rules): a file that
// fails any check is rebuilt and replaced, never trusted.
//
// Format, little-endian: the header below, then `row_count` bpfprof_unwind_row, then the
// table's compact form (compact_unwind_table.h: what the kernel keeps, made once when the table
// is built rather than at every load, where it would delay a recorder's start): its header
// and its pages, entries and rules, checked as the rows are. The rows are written only for a
// table without a compact form (more distinct rules than it indexes): the compact form is what
// is read back. Bump kUnwindCacheVersion (and the directory's -vN) whenever the rows a builder
// makes change.
// Not thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "symbols/dwarf/compact_unwind_table.h"
#include "symbols/dwarf/unwind_table.h"

namespace bpfprof {

// 3: the entry stub's ROOT row; 4: rules read from code without CFI (stack_height.h);
// 5: a return address held in rdi (vfork); 6: rbx's rules, a CFA from rbx (16-byte rows);
// 7: Go's functions from Go's pcsp table; 8: V8's embedded builtins by rbp (v8_builtins.h);
// 11: a .text mostly without CFI (Chromium's) by rbp; 12: the compact form after the rows;
// 13: Go's vDSO callers by their frame base; 14: Go's signal trampoline and restorer;
// 15: the embedded builtins of V8 before 10.x (node 18: v8_Default_embedded_blob_code_data_);
// 16: no rows where the compact form is.
inline constexpr uint32_t kUnwindCacheVersion = 16;

struct UnwindCacheHeader {
  char magic[8];  // "BPFPUNWT"
  uint32_t version;
  uint32_t row_size;  // sizeof(bpfprof_unwind_row)
  uint64_t row_count;
  uint32_t rows_crc32;  // zlib's crc32 of the rows' bytes
  uint32_t reserved;    // 0
};
static_assert(sizeof(UnwindCacheHeader) == 32);

// After the rows: the compact form's counts (`present` 0: the rows have more distinct rules
// than it indexes, and none follows).
struct UnwindCacheCompactHeader {
  uint32_t present;
  uint32_t page_base;
  uint32_t page_count;
  uint32_t entry_count;
  uint32_t rule_count;
  uint32_t crc32;  // of the pages', entries' and rules' bytes
};
static_assert(sizeof(UnwindCacheCompactHeader) == 24);

struct ParsedUnwindTable {
  std::vector<UnwindRow> rows;
  std::optional<CompactUnwindTable> compact;
  uint64_t row_count = 0;  // the entry's rows, also where they were not read
};

// What is read of a cache entry.
enum class TableForm {
  kRows,  // the whole entry: its compact form, or its rows where it has none
  // The compact form alone where the entry has it (what the in-kernel unwinder loads; the rows
  // are most of the file, and were most of the time a whole machine's tables took to load);
  // the rows where it has none.
  kCompactFirst,
};

// A cache file's bytes for `rows` and their compact form (`compact`: as compact_unwind_table
// makes it from them); the rows are left out where the compact form is.
std::string serialize_unwind_table(const std::vector<UnwindRow>& rows,
                                   const std::optional<CompactUnwindTable>& compact);
std::string serialize_unwind_rows(const std::vector<UnwindRow>& rows);  // compacted here
// A cache file's rows and compact form; nullopt when any check fails.
std::optional<ParsedUnwindTable> parse_unwind_table(std::string_view bytes);
std::optional<std::vector<UnwindRow>> parse_unwind_rows(std::string_view bytes);
// The cache entry open as `fd`, of `size` bytes, read as `form` says; nullopt when any check of
// what was read fails (rows left unread are not checked).
std::optional<ParsedUnwindTable> read_unwind_table(int fd, uint64_t size, TableForm form);

enum class UnwindTableSource {
  kCache,           // loaded from a valid cache file
  kBuilt,           // built, and stored in the cache
  kBuiltNotStored,  // built; the cache could not be written (see UnwindTableCache::last_error)
  // Built, not looked up or stored: a user other than root could have written the file, and
  // made it claim the build-id of a file whose table it would then replace for everyone.
  kBuiltUncached,
};

struct CachedUnwindTable {
  std::vector<UnwindRow> rows;  // as built; from the cache only where there is no compact form
  // The rows' compact form; nullopt where they have too many distinct rules, or the provider
  // did not make it (the caller compacts them then).
  std::optional<CompactUnwindTable> compact;
  UnwindTableSource source = UnwindTableSource::kBuilt;
  std::chrono::nanoseconds time{0};  // CPU time to load, or to build (storing left out)
  std::string key;                   // the cache file's name
  // How the rows cover the file's code: known only when built.
  std::optional<std::vector<SectionCoverage>> coverage;
  uint64_t unread_rows = 0;  // the cache entry's rows, not read (TableForm::kCompactFirst)

  bool from_cache() const { return source == UnwindTableSource::kCache; }
  bool has_rows() const {
    return !rows.empty() || unread_rows > 0 || (compact && !compact->rows.empty());
  }
};

using CachedUnwindTableResult = std::variant<CachedUnwindTable, UnwindTableError>;

// What UnwindTableCache::get does for a file without a valid cache entry.
enum class OnCacheMiss {
  kBuild,   // builds the table and stores it
  kReport,  // returns UnwindTableError::kNotInCache (a user's file, never cached, too)
};

class UnwindTableCache {
 public:
  // $BPFPROF_CACHE_DIR if set and not empty, else /var/cache/bpfprof/unwind-v<kUnwindCacheVersion>.
  static std::string default_directory();

  explicit UnwindTableCache(std::string directory = default_directory(),
                            UnwindTableOptions options = {});

  // The table of the file at `path` (or open as `fd`, which the caller keeps; `path` then only
  // names it), from the cache when a valid entry exists, else as `miss` says.
  // A cached table is read as `form` says.
  CachedUnwindTableResult get(const std::string& path, int fd = -1,
                              OnCacheMiss miss = OnCacheMiss::kBuild,
                              TableForm form = TableForm::kRows);

  const std::string& directory() const { return directory_; }
  // Why the last store failed (empty if it did not).
  const std::string& last_error() const { return last_error_; }

 private:
  bool store(const std::string& key, const CachedUnwindTable& table);

  std::string directory_;
  UnwindTableOptions options_;
  std::string last_error_;
};

}  // namespace bpfprof
