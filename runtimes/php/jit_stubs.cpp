#include "runtimes/php/jit_stubs.h"

#include <algorithm>
#include <array>
#include <cstring>

namespace bpfprof {
namespace {

constexpr std::array<uint8_t, 3> kJitSubRsp{0x48, 0x81, 0xec};  // sub $imm32,%rsp
constexpr std::array<uint8_t, 3> kJitAddRsp{0x48, 0x81, 0xc4};  // add $imm32,%rsp
constexpr std::array<uint8_t, 2> kJitCallRax{0xff, 0xd0};       // call *%rax
constexpr size_t kJitImmediateEnd = 7;                          // opcode bytes and imm32
constexpr size_t kJitStubReach = 1024;

uint32_t jit_immediate_at(std::span<const uint8_t> code, size_t at) {
  uint32_t value = 0;
  std::memcpy(&value, code.data() + at + 3, sizeof(value));
  return value;
}

// The first occurrence of `pattern` in code[from, to) with room for an imm32 after it.
template <size_t N>
std::optional<size_t> find_in_code(std::span<const uint8_t> code, size_t from, size_t to,
                                   const std::array<uint8_t, N>& pattern) {
  to = std::min(to, code.size());
  if (from >= to) return std::nullopt;
  const auto begin = code.begin() + static_cast<std::ptrdiff_t>(from);
  const auto end = code.begin() + static_cast<std::ptrdiff_t>(to);
  const auto it = std::search(begin, end, pattern.begin(), pattern.end());
  if (it == end) return std::nullopt;
  const size_t at = static_cast<size_t>(it - code.begin());
  if (at + kJitImmediateEnd > code.size()) return std::nullopt;
  return at;
}

}  // namespace

std::optional<PhpMovedStretch> find_trace_exit(std::span<const uint8_t> code) {
  code = code.first(std::min(code.size(), kPhpJitStubBytes));
  for (size_t from = 0;;) {
    const std::optional<size_t> sub = find_in_code(code, from, code.size(), kJitSubRsp);
    if (!sub) return std::nullopt;
    from = *sub + 1;
    const uint32_t saved = jit_immediate_at(code, *sub);
    if (saved < 0x80 || saved > 0x1000) continue;
    const size_t reach = *sub + kJitStubReach;
    const std::optional<size_t> call =
        find_in_code(code, *sub + kJitImmediateEnd, reach, kJitCallRax);
    const std::optional<size_t> add =
        call ? find_in_code(code, *call, reach, kJitAddRsp) : std::optional<size_t>{};
    if (!add) continue;
    const uint32_t restored = jit_immediate_at(code, *add);
    if (restored != saved && restored != saved + 8) continue;
    return PhpMovedStretch{*sub + kJitImmediateEnd, *add + kJitImmediateEnd, restored};
  }
}

}  // namespace bpfprof
