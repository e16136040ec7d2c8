#include "symbols/go/vdso_calls.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <optional>

namespace bpfprof::go {
namespace {

// The functions are some 200 bytes of assembly.
constexpr size_t kMaxCallerCode = 512;

// The first match at or after `from` of `pattern` with `wild` (an index, or npos) any byte.
std::optional<size_t> find(std::span<const uint8_t> code, size_t from,
                           std::span<const uint8_t> pattern, size_t wild = SIZE_MAX) {
  for (size_t at = from; at + pattern.size() <= code.size(); ++at) {
    bool match = true;
    for (size_t i = 0; i < pattern.size() && match; ++i)
      match = i == wild || code[at + i] == pattern[i];
    if (match) return at;
  }
  return std::nullopt;
}

// Past the instruction that makes rbp the frame's base, in the prologue.
std::optional<size_t> past_frame_base(std::span<const uint8_t> code) {
  constexpr std::array<uint8_t, 3> kMovSpToBp = {0x48, 0x89, 0xe5};           // mov %rsp,%rbp
  constexpr std::array<uint8_t, 5> kLeaSpToBp = {0x48, 0x8d, 0x6c, 0x24, 0};  // lea d8(%rsp),%rbp
  const std::span<const uint8_t> prologue = code.first(std::min<size_t>(code.size(), 16));
  if (auto at = find(prologue, 0, kMovSpToBp)) return *at + kMovSpToBp.size();
  if (auto at = find(prologue, 0, kLeaSpToBp, 4)) return *at + kLeaSpToBp.size();
  return std::nullopt;
}

// The epilogue's restore of the caller's rbp at or after `from`: its start and its end.
std::optional<std::pair<size_t, size_t>> frame_base_restore(std::span<const uint8_t> code,
                                                            size_t from) {
  constexpr std::array<uint8_t, 5> kLoadBp = {0x48, 0x8b, 0x6c, 0x24, 0};  // mov d8(%rsp),%rbp
  constexpr std::array<uint8_t, 2> kPopBpRet = {0x5d, 0xc3};               // pop %rbp; ret
  const std::optional<size_t> load = find(code, from, kLoadBp, 4);
  const std::optional<size_t> pop = find(code, from, kPopBpRet);
  if (load && (!pop || *load < *pop)) return std::pair{*load, *load + kLoadBp.size()};
  if (pop) return std::pair{*pop, *pop + 1};
  return std::nullopt;
}

// Past the `ret` that follows the restore at `at` (directly, or after `add $imm8,%rsp`).
std::optional<size_t> past_return(std::span<const uint8_t> code, size_t at) {
  if (at < code.size() && code[at] == 0xc3) return at + 1;
  const bool add_sp =
      at + 5 <= code.size() && code[at] == 0x48 && code[at + 1] == 0x83 && code[at + 2] == 0xc4;
  if (add_sp && code[at + 4] == 0xc3) return at + 5;
  return std::nullopt;
}

}  // namespace

bool calls_vdso(std::string_view name) {
  for (std::string_view caller :
       {"time.now", "runtime.nanotime1", "runtime.vgetrandom1", "time.now.abi0",
        "runtime.nanotime1.abi0", "runtime.vgetrandom1.abi0"})
    if (name == caller) return true;
  return false;
}

std::vector<CodeRange> frame_pointer_ranges(uint64_t entry, std::span<const uint8_t> bytes) {
  constexpr std::array<uint8_t, 3> kSaveSp = {0x49, 0x89, 0xe4};     // mov %rsp,%r12
  constexpr std::array<uint8_t, 3> kRestoreSp = {0x4c, 0x89, 0xe4};  // mov %r12,%rsp
  const std::span<const uint8_t> code = bytes.first(std::min(bytes.size(), kMaxCallerCode));
  const std::optional<size_t> base = past_frame_base(code);
  if (!base) return {};
  const std::optional<size_t> save = find(code, *base, kSaveSp);
  const std::optional<size_t> restore = save ? find(code, *save, kRestoreSp) : std::nullopt;
  const auto bp_restore = restore ? frame_base_restore(code, *restore) : std::nullopt;
  const std::optional<size_t> ret =
      bp_restore ? past_return(code, bp_restore->second) : std::nullopt;
  if (!ret) return {};
  std::vector<CodeRange> ranges{{entry + *base, entry + bp_restore->second}};
  // The fallback (a system call where there is no vDSO) runs after the return, and jumps back.
  if (*ret < code.size()) ranges.push_back({entry + *ret, entry + code.size()});
  return ranges;
}

}  // namespace bpfprof::go
