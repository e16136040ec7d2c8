// Freed heap pages given back to the kernel. main() asks glibc to keep up to 256 MB of free
// heap for reuse (sample tables grow to hundreds of MB), so the pages a phase freed stay
// resident until this: after the programs' loading (the kernel's BTF parsed), after the
// capture's release, after each period of --switch-output and --flight-recorder.
#pragma once

#include <malloc.h>

namespace bpfprof {

inline void release_freed_memory() { malloc_trim(0); }

}  // namespace bpfprof
