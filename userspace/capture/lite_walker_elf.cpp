// The lite walker object's bytes (bpf/CMakeLists.txt), in a file of their own: its skeleton
// header declares the same names as the full walker's.
#include "userspace/capture/lite_walker_elf.h"

#include "walker_lite.skel.h"

namespace bpfprof {

std::span<const uint8_t> lite_walker_elf() {
  size_t size = 0;
  const void* bytes = walker_lite_bpf__elf_bytes(&size);
  return {static_cast<const uint8_t*>(bytes), size};
}

}  // namespace bpfprof
