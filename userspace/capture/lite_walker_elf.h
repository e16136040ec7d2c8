// The walker object built without the runtimes' readers (bpf/CMakeLists.txt, walker_lite).
#pragma once

#include <cstdint>
#include <span>

namespace bpfprof {

std::span<const uint8_t> lite_walker_elf();

}  // namespace bpfprof
