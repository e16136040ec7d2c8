#include "runtimes/beam/processes.h"

#include <algorithm>

#include "runtimes/beam/jit_list.h"
#include "runtimes/kit/remote_memory.h"
#include "symbols/util/proc_maps.h"
#include "symbols/util/text.h"

namespace bpfprof {
namespace {

constexpr auto kRetry = std::chrono::milliseconds(50);
// What finding one emulator's JIT may read (its GDB list walked once).
constexpr uint64_t kLookBudgetBytes = 16ull << 20;

// The JIT's executable blocks, lowest first; at most BPFPROF_BEAM_JIT_BLOCKS.
std::vector<BeamCodeRange> jit_blocks_of(Pid pid) {
  std::vector<BeamCodeRange> blocks;
  const std::optional<std::vector<MapEntry>> maps = read_proc_maps(pid.value);
  if (!maps) return blocks;
  for (const MapEntry& m : *maps)
    if (m.executable && is_beam_jit_mapping(m.path) && blocks.size() < BPFPROF_BEAM_JIT_BLOCKS)
      blocks.push_back({m.start, m.end});
  return blocks;
}

bpfprof_beam_process kernel_entry(const BeamEmulator& e, const BeamBinary& b, uint64_t bias,
                                  uint32_t frame_layout) {
  const BeamLayout& l = *e.layout;
  bpfprof_beam_process entry{};
  for (size_t i = 0; i < e.jit_blocks.size() && i < BPFPROF_BEAM_JIT_BLOCKS; ++i) {
    entry.jit_low[i] = e.jit_blocks[i].start;
    entry.jit_high[i] = e.jit_blocks[i].end;
    entry.jit_blocks = static_cast<uint32_t>(i + 1);
  }
  entry.frame_layout = frame_layout;
  entry.process_main_low = e.process_main.start;
  entry.process_main_high = e.process_main.end;
  entry.normal_exit = e.normal_exit;
  entry.root_return = b.root_return + bias;
  for (int i = 0; i < BPFPROF_BEAM_SCHEDULER_ARRAYS; ++i) {
    entry.scheduler_arrays[i] = b.scheduler_arrays[i] + bias;
    entry.scheduler_counts[i] = b.scheduler_counts[i] + bias;
  }
  entry.scheduler_stride = l.scheduler_stride;
  entry.esdp_registers = l.esdp_registers;
  entry.esdp_tid = l.esdp_tid;
  entry.esdp_current_process = l.esdp_current_process;
  entry.root_slot_low = l.root_slot_low;
  entry.process_id = l.process_id;
  entry.process_reg = l.process_reg;
  entry.process_stop = l.process_stop;
  entry.process_heap = l.process_heap;
  entry.process_hend = l.process_hend;
  entry.process_current = l.process_current;
  entry.regproc_name = l.regproc_name;
  entry.active_code_index = e.addresses.active_code_index;
  entry.ranges = e.addresses.ranges;
  entry.ranges_size = l.ranges_size;
  entry.ranges_modules = l.ranges_modules;
  return entry;
}

BeamCodeRange biased(BeamCodeRange range, uint64_t bias) {
  return range.start ? BeamCodeRange{range.start + bias, range.end + bias} : BeamCodeRange{};
}

}  // namespace

bool is_beam_jit_mapping(const std::string& path) {
  return path.starts_with("/memfd:vmem") || path.empty() || path.starts_with("//anon");
}

void BeamProcesses::on_mapping(Pid pid, const MappingInfo& mapping, RuntimeStats& stats) {
  if (!is_beam_file_name(base_name(mapping.path))) {
    if (auto it = found_.find(pid); it != found_.end()) it->second.mapped_code = true;
    return;
  }
  if (found_.contains(pid)) return;
  auto key = std::tuple{mapping.path, mapping.inode, mapping.build_id};
  auto it = binaries_.find(key);
  if (it == binaries_.end()) {
    InspectedBeam inspected{inspect_beam_binary(mapping.readable_path()), nullptr};
    std::string error;
    if (std::holds_alternative<BeamBinary>(inspected.binary))
      inspected.elf = ElfFile::open(mapping.readable_path(), &error, ElfContents::kLayout);
    it = binaries_.emplace(std::move(key), std::move(inspected)).first;
  }
  if (const auto* rejected = std::get_if<BeamRejection>(&it->second.binary)) {
    stats.not_read.emplace(mapping.path, rejected->reason);
    return;
  }
  if (!it->second.elf) return;
  const std::optional<uint64_t> vaddr = it->second.elf->file_offset_to_vaddr(mapping.file_offset);
  if (!vaddr) return;
  Found& found = found_[pid];
  found.binary = &std::get<BeamBinary>(it->second.binary);
  found.bias = mapping.start - *vaddr;
}

// Whether the JIT has started, and its blocks: the entry, put or renewed.
void BeamProcesses::look(Pid pid, Found& found) {
  const BeamBinary& b = *found.binary;
  ProcessMemory memory(pid);
  RemoteReader reader(memory, kLookBudgetBytes, 0);
  const std::optional<uint64_t> normal_exit = reader.word(b.normal_exit + found.bias);
  const std::optional<int32_t> frame_layout = reader.value<int32_t>(b.frame_layout + found.bias);
  if (!normal_exit || !*normal_exit || !frame_layout || *frame_layout < 0 || *frame_layout > 1)
    return;
  if (!found.process_main)
    found.process_main =
        find_jit_range(reader, b.jit_descriptor + found.bias, "global", "global::process_main");
  if (!found.process_main) return;
  BeamEmulator emulator{.layout = b.layout,
                        .addresses = {b.active_code_index + found.bias, b.ranges + found.bias,
                                      b.atom_table + found.bias},
                        .jit_blocks = jit_blocks_of(pid),
                        .process_main = *found.process_main,
                        .normal_exit = *normal_exit,
                        .call_nif = biased(b.call_nif, found.bias),
                        .call_dirty_nif = biased(b.call_dirty_nif, found.bias),
                        .call_dirty_bif = biased(b.call_dirty_bif, found.bias)};
  if (!emulator.in_jit(emulator.process_main.start) || !emulator.in_jit(emulator.normal_exit))
    return;
  found.mapped_code = false;
  const BeamEmulator* known = find(pid);
  if (known && known->jit_blocks.size() == emulator.jit_blocks.size() &&
      std::equal(known->jit_blocks.begin(), known->jit_blocks.end(), emulator.jit_blocks.begin(),
                 [](const BeamCodeRange& a, const BeamCodeRange& c) {
                   return a.start == c.start && a.end == c.end;
                 }))
    return;
  const bpfprof_beam_process entry =
      kernel_entry(emulator, b, found.bias, static_cast<uint32_t>(*frame_layout));
  if (known)
    replace(pid, std::move(emulator), entry);
  else
    add(pid, std::move(emulator), entry);
}

void BeamProcesses::refresh() {
  const auto now = std::chrono::steady_clock::now();
  for (auto& [pid, found] : found_) {
    if (!found.mapped_code || now - found.tried < kRetry) continue;
    found.tried = now;
    look(pid, found);
  }
}

}  // namespace bpfprof
