#include "runtimes/v8/processes.h"

#include <unistd.h>

#include <gelf.h>
#include <libelf.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "runtimes/kit/release.h"
#include "symbols/elf/elf_file.h"
#include "symbols/elf/symbol_span.h"
#include "symbols/util/read_file.h"
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
  // Where the file keeps what is at `vaddr`; nullopt when no load segment has it in the file.
  std::optional<uint64_t> file_offset(uint64_t vaddr) const {
    for (const GElf_Phdr& s : segments_)
      if (vaddr >= s.p_vaddr && vaddr - s.p_vaddr < s.p_filesz)
        return s.p_offset + (vaddr - s.p_vaddr);
    return std::nullopt;
  }
  bool read(uint64_t address, void* out, size_t size) override {
    for (const GElf_Phdr& s : segments_) {
      if (address < s.p_vaddr || address - s.p_vaddr + size > s.p_memsz) continue;
      const uint64_t at = address - s.p_vaddr;
      std::memset(out, 0, size);
      if (at >= s.p_filesz) return true;
      const size_t in_file = std::min<uint64_t>(size, s.p_filesz - at);
      return pread_exact(fd_, out, in_file, s.p_offset + at);
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

// The interpreter's builtins: its entry trampolines (block 0) and its bytecode handlers (1).
int interpreter_block_of(std::string_view name) {
  if (name.starts_with("Builtins_Interpreter") ||
      name.starts_with("Builtins_BaselineOrInterpreter"))
    return 0;
  return name.ends_with("Handler") ? 1 : -1;
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
  std::variant<V8Layout, std::string> layout = read_v8_layout(reader, addresses, version);
  if (auto* l = std::get_if<V8Layout>(&layout)) {
    const std::vector<std::optional<SymbolSpan>> blocks = function_symbol_spans(
        fd.get(), "Builtins_", BPFPROF_V8_INTERPRETER_BLOCKS, interpreter_block_of);
    for (size_t k = 0; k < blocks.size(); ++k) {
      const std::optional<SymbolSpan>& b = blocks[k];
      const std::optional<uint64_t> offset = b ? image.file_offset(b->start) : std::nullopt;
      // Each block of code in one segment, or not used.
      if (offset && image.file_offset(b->end - 1) == *offset + (b->end - 1 - b->start))
        l->interpreter_code[k] = {*offset, b->end - b->start};
    }
  }
  return layout;
}

void V8Processes::forgetting(Pid pid) {
  entries_.erase(pid);
  std::erase_if(waiting_, [&](const Waiting& w) { return w.pid == pid; });
}

void V8Processes::on_mapping(Pid pid, const MappingInfo& mapping, RuntimeStats&) {
  if (contains(pid)) {
    // V8 maps its builtins (the interpreter's among them) a second time after it starts.
    auto entry = entries_.find(pid);
    if (entry != entries_.end() && add_interpreter(entry->second, *find(pid), mapping.start,
                                                   mapping.length, mapping.file_offset))
      replace(pid, find(pid), entry->second);
    return;
  }
  auto key = std::pair{mapping.path, mapping.inode};
  if (!binaries_.contains(key))
    binaries_.emplace(
        key, std::async(std::launch::async, read_binary_layout, mapping.readable_path()).share());
  waiting_.push_back(
      Waiting{pid, std::move(key), mapping.start, mapping.length, mapping.file_offset});
}

bpfprof_v8_process V8Processes::entry_of(const Waiting& w, const V8Layout& l,
                                         const std::vector<Waiting>& mapped) {
  bpfprof_v8_process entry{.off_fp_function = l.off_fp_function,
                           .off_fp_bytecode_offset = l.off_fp_bytecode_offset,
                           .off_fp_bytecode_array = l.off_fp_bytecode_array,
                           .function_shared = l.function_shared,
                           .interpreter = {}};
  for (const Waiting& m : mapped)
    if (m.pid == w.pid && m.key == w.key)
      add_interpreter(entry, l, m.start, m.length, m.file_offset);
  return entry;
}

bool V8Processes::add_interpreter(bpfprof_v8_process& entry, const V8Layout& l, uint64_t start,
                                  uint64_t length, uint64_t file_offset) {
  bool added = false;
  for (size_t k = 0; k < l.interpreter_code.size(); ++k) {
    const V8Layout::FileBlock& block = l.interpreter_code[k];
    if (!block.size || block.offset < file_offset || block.offset - file_offset > length ||
        block.size > length - (block.offset - file_offset))
      continue;
    const uint64_t at = start + (block.offset - file_offset);
    // The first free range, else (a third copy) the latest copy's.
    bpfprof_v8_code_range* slot = nullptr;
    bool known = false;
    for (bpfprof_v8_code_range& range : entry.interpreter) {
      known |= range.end && range.start == at;
      if (!range.end && !slot) slot = &range;
    }
    if (known) continue;
    if (!slot)
      slot = &entry.interpreter[BPFPROF_V8_INTERPRETER_RANGES - l.interpreter_code.size() + k];
    *slot = {at, at + block.size};
    added = true;
  }
  return added;
}

std::vector<V8Processes::Change> V8Processes::take_changes(RuntimeStats& stats) {
  // The mappings whose binary is read, together: a process's entry is made from all of them.
  const auto read = std::stable_partition(waiting_.begin(), waiting_.end(), [&](const Waiting& w) {
    return binaries_.at(w.key).wait_for(std::chrono::seconds(0)) != std::future_status::ready;
  });
  const std::vector<Waiting> ready(std::make_move_iterator(read),
                                   std::make_move_iterator(waiting_.end()));
  waiting_.erase(read, waiting_.end());
  for (const Waiting& w : ready) {
    const Layout& layout = binaries_.at(w.key).get();
    if (const auto* rejected = std::get_if<std::string>(&layout))
      stats.not_read.emplace(w.key.first, *rejected);
    else if (!contains(w.pid))
      add(w.pid, &std::get<V8Layout>(layout),
          entries_[w.pid] = entry_of(w, std::get<V8Layout>(layout), ready));
  }
  return RuntimeProcesses::take_changes();
}

}  // namespace bpfprof::v8
