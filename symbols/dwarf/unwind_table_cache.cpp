#include "symbols/dwarf/unwind_table_cache.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <system_error>

#include "symbols/elf/elf_file.h"
#include "symbols/util/atomic_file.h"
#include "symbols/util/text.h"
#include "symbols/util/unique_handle.h"
#include "symbols/util/untrusted_file.h"

namespace bpfprof {
namespace {

constexpr char kMagic[8] = {'B', 'P', 'F', 'P', 'U', 'N', 'W', 'T'};
constexpr const char* kDefaultDirectory = "/var/cache/bpfprof/unwind-v11";

uint32_t crc_of(const void* bytes, size_t size) {
  uLong crc = crc32(0L, Z_NULL, 0);
  // zlib takes at most 4 GiB at once; a table is far smaller (8 bytes a row of a 32-bit pc).
  return static_cast<uint32_t>(
      crc32(crc, static_cast<const Bytef*>(bytes), static_cast<uInt>(size)));
}

bool rows_are_valid(const std::vector<UnwindRow>& rows) {
  for (size_t i = 0; i < rows.size(); ++i) {
    if (i > 0 && rows[i].pc <= rows[i - 1].pc) return false;
    if (rows[i].cfa_rule > BPFPROF_CFA_LAST_RULE || rows[i].rbp_rule > BPFPROF_RBP_UNKNOWN ||
        rows[i].rbx_rule > BPFPROF_RBP_UNKNOWN)
      return false;
  }
  return true;
}

std::string errno_text(const std::string& what) {
  return what + ": " + std::generic_category().message(errno);
}

// `path` and its parents as directories of mode 0755 (whatever the umask).
bool make_directories(const std::string& path, std::string& error) {
  for (size_t slash = path.find('/', 1);; slash = path.find('/', slash + 1)) {
    const std::string prefix = path.substr(0, slash);
    if (::mkdir(prefix.c_str(), 0755) == 0) {
      ::chmod(prefix.c_str(), 0755);
    } else if (errno != EEXIST) {
      error = errno_text("cannot create " + prefix);
      return false;
    }
    if (slash == std::string::npos) return true;
  }
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

std::string serialize_unwind_rows(const std::vector<UnwindRow>& rows) {
  UnwindCacheHeader header{};
  std::memcpy(header.magic, kMagic, sizeof kMagic);
  header.version = kUnwindCacheVersion;
  header.row_size = sizeof(UnwindRow);
  header.row_count = rows.size();
  header.rows_crc32 = crc_of(rows.data(), rows.size() * sizeof(UnwindRow));
  std::string bytes(reinterpret_cast<const char*>(&header), sizeof header);
  if (!rows.empty())
    bytes.append(reinterpret_cast<const char*>(rows.data()), rows.size() * sizeof(UnwindRow));
  return bytes;
}

std::optional<std::vector<UnwindRow>> parse_unwind_rows(std::string_view bytes) {
  UnwindCacheHeader header;
  if (bytes.size() < sizeof header) return std::nullopt;
  std::memcpy(&header, bytes.data(), sizeof header);
  bytes.remove_prefix(sizeof header);
  if (std::memcmp(header.magic, kMagic, sizeof kMagic) != 0) return std::nullopt;
  if (header.version != kUnwindCacheVersion || header.row_size != sizeof(UnwindRow) ||
      header.reserved != 0)
    return std::nullopt;
  if (header.row_count != bytes.size() / sizeof(UnwindRow) || bytes.size() % sizeof(UnwindRow))
    return std::nullopt;
  if (crc_of(bytes.data(), bytes.size()) != header.rows_crc32) return std::nullopt;
  std::vector<UnwindRow> rows(header.row_count);
  if (!rows.empty()) std::memcpy(rows.data(), bytes.data(), bytes.size());  // (never null)
  if (!rows_are_valid(rows)) return std::nullopt;
  return rows;
}

std::string UnwindTableCache::default_directory() {
  const char* configured = std::getenv("BPFPROF_CACHE_DIR");
  return configured != nullptr && *configured != '\0' ? configured : kDefaultDirectory;
}

UnwindTableCache::UnwindTableCache(std::string directory, UnwindTableOptions options)
    : directory_(std::move(directory)), options_(std::move(options)) {}

CachedUnwindTableResult UnwindTableCache::get(const std::string& path, int fd) {
  const auto start = std::chrono::steady_clock::now();
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
    if (const std::optional<std::string> bytes =
            read_untrusted(directory_ + "/" + *key, UntrustedKind::kUnwindCache)) {
      if (std::optional<std::vector<UnwindRow>> rows = parse_unwind_rows(*bytes)) {
        return CachedUnwindTable{std::move(*rows), UnwindTableSource::kCache,
                                 std::chrono::steady_clock::now() - start, *key, std::nullopt};
      }
    }
  }
  UnwindTableResult built = build_unwind_table(path, options_, fd);
  if (const auto* error = std::get_if<UnwindTableError>(&built)) return *error;
  UnwindTable& table = std::get<UnwindTable>(built);
  CachedUnwindTable result{
      std::move(table.rows),
      cacheable ? UnwindTableSource::kBuilt : UnwindTableSource::kBuiltUncached,
      std::chrono::steady_clock::now() - start, cacheable ? *key : "", std::move(table.coverage)};
  if (cacheable && !store(*key, result.rows)) result.source = UnwindTableSource::kBuiltNotStored;
  return result;
}

// A reader sees the old entry or the whole new one. Entries are 0644 whatever the umask
// (the cache is shared); no fsync: an entry cut short by a crash fails its checks on load
// and is rebuilt.
bool UnwindTableCache::store(const std::string& key, const std::vector<UnwindRow>& rows) {
  last_error_.clear();
  if (!make_directories(directory_, last_error_)) return false;
  try {
    AtomicReplaceFile file(directory_ + "/" + key, {.exact_mode = 0644, .durable = false});
    file.write_all(serialize_unwind_rows(rows));
    file.commit();
    return true;
  } catch (const std::runtime_error& e) {
    last_error_ = e.what();
    return false;
  }
}

}  // namespace bpfprof
