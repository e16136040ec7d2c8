#include "runtimes/v8/processes.h"

#include <unistd.h>

#include <gelf.h>
#include <libelf.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtimes/kit/release.h"
#include "symbols/elf/elf_file.h"
#include "symbols/util/text.h"
#include "symbols/util/untrusted_file.h"

namespace bpfprof::v8 {
namespace {

// A binary's image as the loader lays it out: its load segments' file bytes at their
// virtual addresses, zeros past a segment's file size (.bss). Only the program headers are
// read: node's symbol tables are large, and reading them would delay the process's first
// samples.
class FileImage final : public RemoteMemory {
 public:
  explicit FileImage(int fd) : fd_(fd) {
    if (elf_version(EV_CURRENT) == EV_NONE) return;
    Elf* elf = elf_begin(fd, ELF_C_READ_MMAP, nullptr);
    size_t count = 0;
    if (elf && elf_getphdrnum(elf, &count) == 0) {
      for (size_t i = 0; i < count; ++i) {
        GElf_Phdr ph;
        if (gelf_getphdr(elf, static_cast<int>(i), &ph) && ph.p_type == PT_LOAD)
          segments_.push_back(ph);
      }
    }
    if (elf) elf_end(elf);
  }
  bool read(uint64_t address, void* out, size_t size) override {
    for (const GElf_Phdr& s : segments_) {
      if (address < s.p_vaddr || address - s.p_vaddr + size > s.p_memsz) continue;
      const uint64_t at = address - s.p_vaddr;
      std::memset(out, 0, size);
      if (at >= s.p_filesz) return true;
      const size_t in_file = std::min<uint64_t>(size, s.p_filesz - at);
      return pread(fd_, out, in_file, static_cast<off_t>(s.p_offset + at)) ==
             static_cast<ssize_t>(in_file);
    }
    return false;
  }

 private:
  int fd_;
  std::vector<GElf_Phdr> segments_;
};

constexpr uint64_t kLayoutReadBudget = 64 * 1024;
// node binaries are ~100 MB; the version string lies in their read-only data.
constexpr uint64_t kMaxVersionSearchBytes = uint64_t{512} << 20;

// V8's own version numbers (v8::internal::Version::major_ and minor_), where the binary
// exports them (node 16-26 do): their initial values, in its data.
constexpr const char* kVersionMajor = "_ZN2v88internal7Version6major_E";
constexpr const char* kVersionMinor = "_ZN2v88internal7Version6minor_E";

std::optional<RuntimeRelease> exported_v8_version(
    const std::unordered_map<std::string, DynamicSymbol>& symbols, RemoteReader& reader) {
  auto number = [&](const char* name) -> std::optional<int32_t> {
    const auto it = symbols.find(name);
    if (it == symbols.end() || !it->second.defined || it->second.size != 4) return std::nullopt;
    return reader.value<int32_t>(it->second.address);
  };
  const std::optional<int32_t> major = number(kVersionMajor), minor = number(kVersionMinor);
  if (!major || !minor || *major <= 0 || *major > 1000 || *minor < 0 || *minor > 1000)
    return std::nullopt;
  return RuntimeRelease{static_cast<uint32_t>(*major), static_cast<uint32_t>(*minor), 0};
}

// Otherwise the version node's build puts in its text ("11.3.244.8-node.16"): a scan of the
// file, 10-25 ms for node 20.
std::optional<RuntimeRelease> file_v8_version(int fd) {
  std::optional<RuntimeRelease> version;
  scan_file_text(fd, kMaxVersionSearchBytes, [&](std::string_view bytes) {
    return (version = node_v8_version(bytes)).has_value();
  });
  return version;
}

}  // namespace

bool is_v8_file_name(const std::string& base) {
  return base == "node" || base == "nodejs" || base.starts_with("libnode.so");
}

std::variant<V8Layout, std::string> read_binary_layout(const std::string& readable_path) {
  const UniqueFd fd =
      open_untrusted(readable_path, UntrustedKind::kBinary, std::nullopt, Copying::kNever).fd;
  if (!fd) return "cannot open " + readable_path;
  const std::vector<std::string>& names = v8_layout_symbol_names();
  std::vector<std::string> wanted = names;
  wanted.insert(wanted.end(), {kVersionMajor, kVersionMinor});
  const auto symbols = read_dynamic_symbols(fd.get(), wanted);
  SymbolAddresses addresses(names.size(), 0);
  for (size_t i = 0; i < names.size(); ++i) {
    auto it = symbols.find(names[i]);
    if (it != symbols.end() && it->second.defined) addresses[i] = it->second.address;
  }
  FileImage image(fd.get());
  RemoteReader reader(image, kLayoutReadBudget, 0);
  std::optional<RuntimeRelease> version = exported_v8_version(symbols, reader);
  if (!version) version = file_v8_version(fd.get());
  return read_v8_layout(reader, addresses, version);
}

void V8Processes::forgetting(Pid pid) {
  std::erase_if(waiting_, [&](const auto& entry) { return entry.first == pid; });
}

void V8Processes::on_mapping(Pid pid, const MappingInfo& mapping, RuntimeStats&) {
  if (contains(pid)) return;
  auto key = std::pair{mapping.path, mapping.inode};
  if (!binaries_.contains(key))
    binaries_.emplace(
        key, std::async(std::launch::async, read_binary_layout, mapping.readable_path()).share());
  waiting_.emplace_back(pid, std::move(key));
}

std::vector<V8Processes::Change> V8Processes::take_changes(RuntimeStats& stats) {
  std::erase_if(waiting_, [&](const auto& entry) {
    const auto& [pid, key] = entry;
    const std::shared_future<Layout>& read = binaries_.at(key);
    if (read.wait_for(std::chrono::seconds(0)) != std::future_status::ready) return false;
    const Layout& layout = read.get();
    if (const auto* rejected = std::get_if<std::string>(&layout)) {
      stats.not_read.emplace(key.first, *rejected);
    } else {
      const V8Layout& l = std::get<V8Layout>(layout);
      add(pid, &l,
          bpfprof_v8_process{.off_fp_function = l.off_fp_function,
                             .off_fp_bytecode_offset = l.off_fp_bytecode_offset,
                             .off_fp_bytecode_array = l.off_fp_bytecode_array,
                             .function_shared = l.function_shared});
    }
    return true;
  });
  return RuntimeProcesses::take_changes();
}

}  // namespace bpfprof::v8
