// Recognises a BEAM emulator (beam.smp) and finds, in its own addresses, what names its JIT
// code: the active code index and the range tables (`r`, a static of beam_ranges.c that a
// stripped binary does not name: found from the code of the exported erts_lookup_function_info,
// whose first call is to find_range, which loads both), and the atom table (exported). The
// release comes from the emulator's banner ("[erts-13.1.5]"); each layout fact the code uses
// is checked in it (the range tables' stride, the header's functions) before it is trusted.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>

#include "runtimes/beam/layout.h"

namespace bpfprof {

// Whether a mapped file's base name is the emulator's.
bool is_beam_file_name(std::string_view base);

const BeamLayout* beam_layout(const ErtsVersion& version);

// What find_range's first instructions load: the active code index (a 32-bit load) and the
// range tables (an address), indexed by a shift of the code index (log2 of the stride).
struct BeamRangeCode {
  uint64_t active_code_index = 0;
  uint64_t ranges = 0;
  uint32_t stride_shift = 0;
};
// Within `code` at `address`: the target of the first direct call (erts_lookup_function_info
// calls find_range first); nullopt without one in the bytes given.
std::optional<uint64_t> first_call_target(std::span<const uint8_t> code, uint64_t address);
// find_range's loads: a RIP-relative 32-bit mov, a RIP-relative lea and a left shift of a
// register by a constant, in its first bytes; nullopt unless all three are there.
std::optional<BeamRangeCode> decode_find_range(std::span<const uint8_t> code, uint64_t address);
// The displacements of `lea disp(%reg)` with a base register other than rip in `code`: the
// header's functions offset is one of erts_lookup_function_info's.
bool has_lea_displacement(std::span<const uint8_t> code, uint64_t address, int64_t displacement);

// The return address of the one direct call to `target` in `code` (at `address`), found by
// its bytes (e8 rel32); nullopt unless there is exactly one.
std::optional<uint64_t> only_call_return(std::span<const uint8_t> code, uint64_t address,
                                         uint64_t target);
// Whether `code` multiplies by `factor` (imul with an immediate): erts_get_aux_work_data's
// index into the scheduler arrays, by their element's size.
bool has_imul_by(std::span<const uint8_t> code, uint64_t address, int64_t factor);

// [start, end) of a function.
struct BeamCodeRange {
  uint64_t start = 0;
  uint64_t end = 0;
  bool contains(uint64_t pc) const { return pc >= start && pc < end; }
};

// What one beam.smp says, in its own virtual addresses.
struct BeamBinary {
  const BeamLayout* layout = nullptr;
  ErtsVersion version;
  uint64_t active_code_index = 0;  // the_active_code_index (u32)
  uint64_t ranges = 0;             // r[ERTS_NUM_CODE_IX]
  uint64_t atom_table = 0;         // erts_atom_table
  // For the walk: the pointers to the normal, dirty CPU and dirty IO scheduler arrays and
  // their counts, beam_normal_exit and erts_frame_layout (variables set as the JIT starts),
  // GDB's JIT descriptor (where the JIT's process_main is told), and the return address of
  // sched_thread_func's call of process_main.
  uint64_t scheduler_arrays[3] = {};
  uint64_t scheduler_counts[3] = {};
  uint64_t normal_exit = 0;
  uint64_t frame_layout = 0;
  uint64_t jit_descriptor = 0;
  uint64_t root_return = 0;
  // For the merge: the C frames under which a NIF's or a dirty call's Erlang function runs.
  BeamCodeRange call_nif;
  BeamCodeRange call_dirty_nif;
  BeamCodeRange call_dirty_bif;
};
struct BeamRejection {
  std::string reason;
};
std::variant<BeamBinary, BeamRejection> inspect_beam_binary(const std::string& readable_path);

}  // namespace bpfprof
