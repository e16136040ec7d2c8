#include "userspace/capture/core_btf_cache.h"

#include <fcntl.h>

#include <cctype>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <stdexcept>

#include "symbols/elf/elf_file.h"
#include "symbols/util/atomic_file.h"
#include "symbols/util/crc32.h"
#include "symbols/util/read_file.h"
#include "symbols/util/text.h"
#include "symbols/util/unique_handle.h"
#include "symbols/util/untrusted_file.h"

namespace bpfprof {
namespace {

constexpr char kCoreBtfMagic[8] = {'B', 'P', 'F', 'P', 'C', 'B', 'T', 'F'};
constexpr uint32_t kCoreBtfVersion = 1;
constexpr const char* kCoreBtfPrefix = "core-btf-";

struct CoreBtfHeader {
  char magic[8];
  uint32_t version;
  uint32_t tracepoints;
  uint32_t btf_size;
  uint32_t crc32;  // of the ids and the BTF
};
static_assert(sizeof(CoreBtfHeader) == 24);

// This boot's id without its dashes; empty if unreadable.
std::string current_boot_id() {
  std::string id = read_entire_file("/proc/sys/kernel/random/boot_id").value_or("");
  std::erase_if(id, [](char c) { return !isxdigit(static_cast<unsigned char>(c)); });
  return id.size() == 32 ? id : "";
}

}  // namespace

std::string serialize_core_btf(const CoreBtf& core) {
  const std::string_view ids(reinterpret_cast<const char*>(core.tracepoint_ids.data()),
                             core.tracepoint_ids.size() * sizeof(uint32_t));
  CoreBtfHeader header{};
  std::memcpy(header.magic, kCoreBtfMagic, sizeof kCoreBtfMagic);
  header.version = kCoreBtfVersion;
  header.tracepoints = static_cast<uint32_t>(core.tracepoint_ids.size());
  header.btf_size = static_cast<uint32_t>(core.btf.size());
  header.crc32 = crc32_of(core.btf, crc32_of(ids));
  std::string bytes(reinterpret_cast<const char*>(&header), sizeof header);
  bytes.append(ids);
  bytes.append(core.btf);
  return bytes;
}

std::optional<CoreBtf> parse_core_btf(std::string_view bytes, size_t tracepoints) {
  CoreBtfHeader header;
  if (bytes.size() < sizeof header) return std::nullopt;
  std::memcpy(&header, bytes.data(), sizeof header);
  const uint64_t ids_size = uint64_t{header.tracepoints} * sizeof(uint32_t);
  if (std::memcmp(header.magic, kCoreBtfMagic, sizeof kCoreBtfMagic) != 0 ||
      header.version != kCoreBtfVersion || header.tracepoints != tracepoints ||
      header.btf_size == 0 || bytes.size() != sizeof header + ids_size + header.btf_size)
    return std::nullopt;
  const std::string_view ids = bytes.substr(sizeof header, ids_size);
  const std::string_view btf = bytes.substr(sizeof header + ids_size);
  if (crc32_of(btf, crc32_of(ids)) != header.crc32) return std::nullopt;
  CoreBtf core{std::string(btf), std::vector<uint32_t>(tracepoints)};
  std::memcpy(core.tracepoint_ids.data(), ids.data(), ids.size());
  return core;
}

std::string bpf_objects_key(std::initializer_list<std::span<const uint8_t>> object_elves) {
  // bpfprof's own build-id: a link hashes the whole output, the embedded objects with it.
  if (const UniqueFd self(open("/proc/self/exe", O_RDONLY | O_CLOEXEC)); self) {
    const std::vector<uint8_t> build_id = read_elf_build_id(self.get());
    if (!build_id.empty()) return hex_string(build_id);
  }
  uint32_t crc = 0;  // linked without one: the objects' bytes (1-2 ms at every start)
  for (std::span<const uint8_t> elf : object_elves) crc = crc32_of(elf.data(), elf.size(), crc);
  char hex[9];
  snprintf(hex, sizeof hex, "%08x", crc);
  return hex;
}

CoreBtfCache::CoreBtfCache(std::string directory, const std::string& objects_key)
    : directory_(std::move(directory)) {
  const std::string boot = current_boot_id();
  if (boot.empty() || objects_key.empty()) return;
  path_ = directory_ + "/" + kCoreBtfPrefix + boot + "-" + objects_key + ".btf";
}

std::optional<CoreBtf> CoreBtfCache::read(size_t tracepoints) const {
  if (path_.empty()) return std::nullopt;
  const std::optional<std::string> bytes = read_untrusted(path_, UntrustedKind::kUnwindCache);
  if (!bytes) return std::nullopt;
  return parse_core_btf(*bytes, tracepoints);
}

bool CoreBtfCache::store(const CoreBtf& core) const {
  std::string error;
  if (path_.empty() || !make_directories(directory_, error)) return false;
  const std::string boot_prefix = path_.substr(0, path_.rfind('-'));
  std::error_code ignored;
  for (const auto& entry : std::filesystem::directory_iterator(directory_, ignored)) {
    const std::string name = entry.path().string();
    if (entry.path().filename().string().starts_with(kCoreBtfPrefix) &&
        !name.starts_with(boot_prefix))
      std::filesystem::remove(entry.path(), ignored);  // another boot's
  }
  try {
    AtomicReplaceFile file(path_, {.exact_mode = 0644, .durable = false});
    file.write_all(serialize_core_btf(core));
    file.commit();
    return true;
  } catch (const std::runtime_error&) {
    return false;
  }
}

}  // namespace bpfprof
