// The BPF objects' minimal BTF (core_btf.h) and their tracepoints' attach ids, kept for the
// boot in bpfprof's cache directory (beside the unwind tables): the kernel's BTF (5.5 MB) is
// then parsed once a boot, not at every start, where reading, parsing and the minimal BTF's
// making were 17-26 ms before the first sample.
//
// Key: the boot's id (the kernel's BTF cannot change within a boot) and bpfprof's build-id,
// which covers the objects it embeds (else the CRC-32 of the objects' bytes). Format,
// little-endian: magic "BPFPCBTF", then u32 version, tracepoint count, BTF size and the CRC-32
// of what follows, then the ids (u32 each) and the BTF. An entry that
// fails a check is not used (and is replaced).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace bpfprof {

struct CoreBtf {
  std::string btf;                       // raw BTF bytes
  std::vector<uint32_t> tracepoint_ids;  // in the order the caller asks for them
};

std::string serialize_core_btf(const CoreBtf& core);
// Nullopt when a check fails or the entry has not `tracepoints` ids.
std::optional<CoreBtf> parse_core_btf(std::string_view bytes, size_t tracepoints);

// What names the BPF objects `object_elves` in an entry's name: bpfprof's own build-id (it
// covers the objects it embeds), else the CRC-32 of their bytes.
std::string bpf_objects_key(std::initializer_list<std::span<const uint8_t>> object_elves);

class CoreBtfCache {
 public:
  // In `directory` (UnwindTableCache::default_directory()), for the objects `objects_key` names.
  CoreBtfCache(std::string directory, const std::string& objects_key);

  std::optional<CoreBtf> read(size_t tracepoints) const;
  // Written whole or not at all; entries of other boots are removed. False when it could not
  // be written (the recording goes on: the next start parses again).
  bool store(const CoreBtf& core) const;

  const std::string& path() const { return path_; }

 private:
  std::string directory_;
  std::string path_;  // empty when the boot's id is unknown: nothing is kept
};

}  // namespace bpfprof
