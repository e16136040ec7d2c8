#include "runtimes/golabels/processes.h"

#include <sys/mman.h>

#include <string_view>

#include "symbols/elf/elf_file.h"
#include "symbols/symbolizer.h"
#include "symbols/util/untrusted_file.h"

namespace bpfprof {
namespace {

// Go binaries run to a few hundred MB; a larger file is not searched.
constexpr uint64_t kMaxSearchedBytes = uint64_t{1} << 30;

// Whether the file open as `fd` (of `size` bytes) holds `text`.
bool file_contains(int fd, uint64_t size, std::string_view text) {
  if (size == 0 || size > kMaxSearchedBytes) return false;
  void* mapped = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  if (mapped == MAP_FAILED) return false;
  const std::string_view bytes(static_cast<const char*>(mapped), size);
  const bool found = bytes.find(text) != std::string_view::npos;
  munmap(mapped, size);
  return found;
}

}  // namespace

bpfprof_go_labels_process go_labels_entry(const go::LabelsSite& site) {
  return bpfprof_go_labels_process{.g_slot = site.g_slot,
                                   .m_curg = site.m_curg,
                                   .g_labels = site.layout.g_labels,
                                   .form = site.layout.form == go::LabelsForm::kSlice
                                               ? BPFPROF_GO_LABELS_SLICE
                                               : BPFPROF_GO_LABELS_MAP};
}

GoLabelsBinary inspect_go_labels_binary(const std::string& readable_path) {
  const std::unique_ptr<ElfFile> elf = ElfFile::open(readable_path, nullptr, ElfContents::kLayout);
  if (!elf || !elf->is_go()) return {};
  const UntrustedOpen opened =
      open_untrusted(readable_path, UntrustedKind::kBinary, std::nullopt, Copying::kNever);
  // Most Go programs set no labels: the setter's name, searched for in the file's bytes, spares
  // them the reading of their function table.
  if (!opened.fd || !file_contains(opened.fd.get(), opened.size, go::kSetProfLabel)) return {};
  const std::unique_ptr<go::GoTable> table = load_go_table(readable_path);
  if (!table) return {};
  const int fd = opened.fd.get();
  std::optional<go::LabelsSite> site = go::labels_site(
      *table, [fd](uint64_t vaddr, uint64_t size) { return read_code_bytes(fd, vaddr, size); });
  if (site) return {site, ""};
  // Without the setter the program labels nothing; with it, its code is of a shape not known.
  if (go::function_named(*table, go::kSetProfLabel))
    return {std::nullopt, "Go labels: runtime_setProfLabel or systemstack of a shape not known"};
  return {};
}

void GoLabelsProcesses::on_mapping(Pid pid, const MappingInfo& mapping, RuntimeStats& stats) {
  if (contains(pid) || !mapping.path.starts_with('/')) return;
  auto key = std::tuple{mapping.path, mapping.inode, mapping.build_id};
  auto it = binaries_.find(key);
  if (it == binaries_.end())
    it = binaries_.emplace(std::move(key), inspect_go_labels_binary(mapping.readable_path())).first;
  const GoLabelsBinary& binary = it->second;
  if (!binary.rejection.empty()) stats.not_read.emplace(mapping.path, binary.rejection);
  if (binary.site) add(pid, GoLabelsProgram{}, go_labels_entry(*binary.site));
}

}  // namespace bpfprof
