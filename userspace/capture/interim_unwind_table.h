// INTERIM (until branch unwind-tables is merged): the compact unwind table of one ELF file,
// converted from its .eh_frame with libdw, without a cache. See interim_unwind_table.cpp.
#pragma once

#include <optional>
#include <string>

#include "userspace/capture/kernel_unwind.h"

namespace bpfprof {

std::optional<UnwindTable> interim_unwind_table(const std::string& path);

}  // namespace bpfprof
