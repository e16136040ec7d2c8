#include "runtimes/golabels/processes.h"

#include "symbols/elf/elf_file.h"
#include "symbols/symbolizer.h"
#include "symbols/util/mapping_kind.h"
#include "symbols/util/untrusted_file.h"

namespace bpfprof {

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
  // Most Go programs set no labels: the setter's name, searched for in the file's bytes, spares
  // them the reading of their function table.
  const std::unique_ptr<go::GoTable> table = load_go_table(readable_path, go::kSetProfLabel);
  if (!table) return {};
  const UntrustedOpen opened =
      open_untrusted(readable_path, UntrustedKind::kBinary, std::nullopt, Copying::kNever);
  if (!opened.fd) return {};
  const int fd = opened.fd.get();
  std::optional<go::LabelsSite> site = go::labels_site(
      *table, [fd](uint64_t vaddr, uint64_t size) { return read_code_bytes(fd, vaddr, size); });
  if (site) return {site, ""};
  // Without the setter the program labels nothing; with it, its code is of a shape not known.
  if (go::function_named(*table, go::kSetProfLabel))
    return {std::nullopt, "Go labels: runtime_setProfLabel or systemstack of a shape not known"};
  return {};
}

// Only a file's mapping can be a Go binary: shared anonymous memory (opcache's JIT buffer, 64 MB
// of it) took 66 ms to search.
void GoLabelsProcesses::on_mapping(Pid pid, const MappingInfo& mapping, RuntimeStats& stats) {
  if (contains(pid) || classify_mapping(mapping.path) != MappingKind::kFile) return;
  auto key = std::tuple{mapping.path, mapping.inode, mapping.build_id};
  auto it = binaries_.find(key);
  if (it == binaries_.end())
    it = binaries_.emplace(std::move(key), inspect_go_labels_binary(mapping.readable_path())).first;
  const GoLabelsBinary& binary = it->second;
  if (!binary.rejection.empty()) stats.not_read.emplace(mapping.path, binary.rejection);
  if (binary.site) add(pid, GoLabelsProgram{}, go_labels_entry(*binary.site));
}

}  // namespace bpfprof
