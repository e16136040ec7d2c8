// The BEAM JIT's registrations with GDB's JIT interface (__jit_debug_descriptor, always on in
// Linux builds): a list of entries, newest first, each the JIT's own record of a piece of
// code, its name and its ranges' names (jit/beam_jit_metadata.cpp). The shared fragments are
// one entry named "global", whose ranges are "global::<fragment>"; the scheduler loop the
// walk needs to know is "global::process_main". Read from another process: untrusted memory.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "runtimes/beam/binary.h"
#include "runtimes/kit/remote_memory.h"

namespace bpfprof {

// Bounds: entries walked, and the bytes of one entry's record.
inline constexpr uint32_t kMaxBeamJitEntries = 1 << 16;
inline constexpr uint64_t kMaxBeamJitRecordBytes = 1 << 20;

// In one code registration's record (`record`, mapped at nothing: offsets are its own): the
// range named `range` of the code named `code`, in the process's addresses; nullopt when the
// record is another's or does not parse.
std::optional<BeamCodeRange> jit_record_range(std::span<const uint8_t> record,
                                              std::string_view code, std::string_view range);

// The range named `range` of the code registration named `code`, searching the list of the
// descriptor at `descriptor`; nullopt until the JIT has registered it.
std::optional<BeamCodeRange> find_jit_range(RemoteReader& reader, uint64_t descriptor,
                                            std::string_view code, std::string_view range);

}  // namespace bpfprof
