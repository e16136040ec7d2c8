#include "symbols/go/cgo_switches.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <optional>

namespace bpfprof::go {
namespace {

// Both functions are a few hundred bytes of assembly; more is not theirs.
constexpr size_t kMaxCode = 1024;

class Code {
 public:
  Code(uint64_t entry, std::span<const uint8_t> bytes)
      : entry_(entry), bytes_(bytes.first(std::min(bytes.size(), kMaxCode))) {}

  size_t size() const { return bytes_.size(); }
  uint64_t address(size_t at) const { return entry_ + at; }
  bool has(size_t at, std::span<const uint8_t> pattern) const {
    return at <= bytes_.size() && bytes_.size() - at >= pattern.size() &&
           memcmp(bytes_.data() + at, pattern.data(), pattern.size()) == 0;
  }
  // The first place at or after `from` where `pattern` is.
  std::optional<size_t> find(size_t from, std::span<const uint8_t> pattern) const {
    for (size_t at = from; at < bytes_.size(); ++at)
      if (has(at, pattern)) return at;
    return std::nullopt;
  }
  std::optional<uint8_t> byte(size_t at) const {
    return at < bytes_.size() ? std::optional<uint8_t>(bytes_[at]) : std::nullopt;
  }
  std::optional<int32_t> s32(size_t at) const {
    if (at > bytes_.size() || bytes_.size() - at < 4) return std::nullopt;
    int32_t value;
    memcpy(&value, bytes_.data() + at, 4);
    return value;
  }

 private:
  uint64_t entry_;
  std::span<const uint8_t> bytes_;
};

// sp - its value at the function's entry, at `pc`; nullopt outside the table.
std::optional<int32_t> delta_at(const FrameLayout& layout, uint64_t pc) {
  for (const SpDelta& span : layout.sp)
    if (span.start <= pc && pc < span.end) return span.delta;
  return std::nullopt;
}

// Past the call at `at` (register moves of the C arguments first): `call *%rax` or
// `call rel32`, as asmcgocall calls the C function (directly or by a landing pad that jumps).
std::optional<size_t> past_call(const Code& code, size_t at) {
  constexpr std::array<uint8_t, 3> kMoveBxToDi = {0x48, 0x89, 0xdf};
  constexpr std::array<uint8_t, 3> kMoveBxToCx = {0x48, 0x89, 0xd9};
  constexpr std::array<uint8_t, 2> kCallRax = {0xff, 0xd0};
  for (int moves = 0; moves < 2 && (code.has(at, kMoveBxToDi) || code.has(at, kMoveBxToCx));
       ++moves)
    at += 3;
  if (code.has(at, kCallRax)) return at + 2;
  if (code.byte(at) == 0xe8 && code.s32(at + 1)) return at + 5;
  return std::nullopt;
}

// The depth slot stored at `at` (`mov %reg,disp8(%rsp)` or `mov %reg,(%rsp)`; reg_bits: the
// ModRM's reg field), with the instruction's length.
std::optional<std::pair<int32_t, size_t>> stack_store(const Code& code, size_t at,
                                                      uint8_t reg_bits) {
  const std::array<uint8_t, 4> at_sp = {0x48, 0x89, static_cast<uint8_t>(0x04 | reg_bits), 0x24};
  const std::array<uint8_t, 4> at_disp8 = {0x48, 0x89, static_cast<uint8_t>(0x44 | reg_bits), 0x24};
  if (code.has(at, at_sp)) return std::pair<int32_t, size_t>{0, 4};
  const std::optional<uint8_t> disp8 = code.byte(at + 4);
  if (code.has(at, at_disp8) && disp8 < 0x80) return std::pair<int32_t, size_t>{*disp8, 5};
  return std::nullopt;
}

constexpr uint8_t kRegDi = 7 << 3;
constexpr uint8_t kRegDx = 2 << 3;

// asmcgocall's switch to the system stack: g at sp + G (`mov %rdi,G(%rsp)`), g.stack.hi
// (`mov 8(%rdi),%rdi; sub %rdx,%rdi`), the depth at sp + G - 8, then the call. Its branch for
// a thread already on the system stack stores 0 at G and the sp (rdx) at G - 8. The same
// slots in both; rdx is sp as the function's code began to use it.
std::optional<int32_t> asmcgocall_slot(const Code& code, size_t g_store, size_t* call_end) {
  constexpr std::array<uint8_t, 7> kStackHiMinusDx = {0x48, 0x8b, 0x7f, kGStackHi,
                                                      0x48, 0x29, 0xd7};
  constexpr std::array<uint8_t, 4> kZeroG = {0x48, 0xc7, 0x44, 0x24};
  std::optional<std::pair<int32_t, size_t>> depth;
  size_t after = 0;
  int32_t g_slot = 0;
  if (code.has(g_store, kZeroG)) {
    g_slot = code.byte(g_store + 4).value_or(0x80);
    if (g_slot >= 0x80 || code.s32(g_store + 5) != 0) return std::nullopt;
    after = g_store + 9;
    depth = stack_store(code, after, kRegDx);
  } else if (std::optional<std::pair<int32_t, size_t>> g = stack_store(code, g_store, kRegDi)) {
    g_slot = g->first;
    if (!code.has(g_store + g->second, kStackHiMinusDx)) return std::nullopt;
    after = g_store + g->second + kStackHiMinusDx.size();
    depth = stack_store(code, after, kRegDi);
  }
  if (!depth || depth->first + 8 != g_slot) return std::nullopt;
  std::optional<size_t> end = past_call(code, after + depth->second);
  if (!end) return std::nullopt;
  *call_end = *end;
  return depth->first;
}

std::vector<CgoSwitch> asmcgocall_switches(const Code& code, const FrameLayout& layout) {
  constexpr std::array<uint8_t, 3> kMoveSpToDx = {0x48, 0x89, 0xe2};
  std::vector<CgoSwitch> found;
  const std::optional<size_t> keep_sp = code.find(0, kMoveSpToDx);
  if (!keep_sp) return found;
  const std::optional<int32_t> delta = delta_at(layout, code.address(*keep_sp));
  if (!delta || *delta < 0) return found;
  // A frame pointer pushed first (`push %rbp`) is the caller's rbp, below the return address.
  const bool rbp_saved = *delta >= 8 && code.byte(0) == 0x55;
  for (size_t at = *keep_sp + kMoveSpToDx.size(); at < code.size() && found.size() < 2; ++at) {
    size_t call_end = 0;
    if (std::optional<int32_t> slot = asmcgocall_slot(code, at, &call_end)) {
      found.push_back(
          {CgoSwitchKind::kCallIntoC, code.address(call_end), *delta + 8, rbp_saved, *slot});
      at = call_end - 1;
    }
  }
  return found;
}

// cgocallback on the system stack: g from the thread pointer (`mov %fs:D,%rbx`), g.m, m.g0,
// and g0.sched.sp = sp (nested cgo calls start below this frame), then the call into Go
// (`lea cgocallbackg(%rip),%rax; call *%rax`) from a frame on the goroutine's stack of the
// same size: its return address is where the switch back is found.
std::optional<CgoSwitch> cgocallback_switch(const Code& code, const FrameLayout& layout) {
  constexpr std::array<uint8_t, 5> kTlsToBx = {0x64, 0x48, 0x8b, 0x1c, 0x25};
  constexpr std::array<uint8_t, 4> kGMLoad = {0x48, 0x8b, 0x5b, kGM};
  constexpr std::array<uint8_t, 3> kMG0Load = {0x48, 0x8b, 0x33};  // m.g0 at 0: no displacement
  constexpr std::array<uint8_t, 4> kSchedSpIsSp = {0x48, 0x89, 0x66, kGSchedSp};
  constexpr std::array<uint8_t, 3> kLeaRax = {0x48, 0x8d, 0x05};
  constexpr std::array<uint8_t, 2> kCallRax = {0xff, 0xd0};
  const std::optional<size_t> tls = code.find(0, kTlsToBx);
  if (!tls) return std::nullopt;
  const std::optional<int32_t> g_offset = code.s32(*tls + kTlsToBx.size());
  const std::optional<size_t> g_m = code.find(*tls, kGMLoad);
  if (!g_offset || *g_offset < INT16_MIN || *g_offset > 0 || !g_m) return std::nullopt;
  const std::optional<size_t> m_g0 = code.find(*g_m, kMG0Load);
  const std::optional<size_t> sched = m_g0 ? code.find(*m_g0, kSchedSpIsSp) : std::nullopt;
  const std::optional<size_t> lea = sched ? code.find(*sched, kLeaRax) : std::nullopt;
  if (!lea || !code.has(*lea + 7, kCallRax)) return std::nullopt;
  const uint64_t return_address = code.address(*lea + 9);
  const std::optional<int32_t> delta = delta_at(layout, return_address - 1);
  if (!delta || *delta < 16 || delta_at(layout, code.address(*sched)) != delta) return std::nullopt;
  // The prologue keeps the caller's rbp at the frame's top (`mov %rbp,delta-8(%rsp)`).
  const std::array<uint8_t, 5> save_rbp = {0x48, 0x89, 0x6c, 0x24,
                                           static_cast<uint8_t>(*delta - 8)};
  const bool rbp_saved = *delta - 8 < 0x80 && code.find(0, save_rbp).value_or(SIZE_MAX) < *tls;
  return CgoSwitch{CgoSwitchKind::kCallbackIntoGo, return_address, *delta + 8, rbp_saved,
                   *g_offset};
}

// The thread pointer's g slot `at`: its offset and the instructions' length. Two shapes: the
// slot's offset in the load (`mov %fs:D,%rax`), or loaded into rcx first
// (`mov $D,%rcx; mov %fs:(%rcx),%rax`: position-independent builds).
struct TlsAccess {
  int32_t offset = 0;
  size_t length = 0;
};
std::optional<TlsAccess> g_from_tls(const Code& code, size_t at) {
  constexpr std::array<uint8_t, 5> kTlsToAx = {0x64, 0x48, 0x8b, 0x04, 0x25};
  constexpr std::array<uint8_t, 3> kImmToCx = {0x48, 0xc7, 0xc1};
  constexpr std::array<uint8_t, 4> kTlsAtCxToAx = {0x64, 0x48, 0x8b, 0x01};
  std::optional<TlsAccess> found;
  if (code.has(at, kTlsToAx))
    found = TlsAccess{code.s32(at + kTlsToAx.size()).value_or(1), kTlsToAx.size() + 4};
  else if (code.has(at, kImmToCx) && code.has(at + kImmToCx.size() + 4, kTlsAtCxToAx))
    found = TlsAccess{code.s32(at + kImmToCx.size()).value_or(1),
                      kImmToCx.size() + 4 + kTlsAtCxToAx.size()};
  if (!found || found->offset < INT16_MIN || found->offset > 0) return std::nullopt;
  return found;
}

// The store of rax back into the g slot `offset` (as g_from_tls loaded it, rcx unchanged): its
// length.
std::optional<size_t> g_to_tls(const Code& code, size_t at, int32_t offset) {
  constexpr std::array<uint8_t, 5> kAxToTls = {0x64, 0x48, 0x89, 0x04, 0x25};
  constexpr std::array<uint8_t, 4> kAxToTlsAtCx = {0x64, 0x48, 0x89, 0x01};
  if (code.has(at, kAxToTls) && code.s32(at + kAxToTls.size()) == offset)
    return kAxToTls.size() + 4;
  if (code.has(at, kAxToTlsAtCx)) return kAxToTlsAtCx.size();
  return std::nullopt;
}

// systemstack's way back to the goroutine, just past its call (`call *%rdi`) of the function:
// g from the thread pointer, g.m, m.curg, sp = curg.sched.sp (and in current releases rbp =
// curg.sched.bp), the g slot cleared, then `ret` or `pop %rbp; ret`: the goroutine's frame is
// the one systemstack returns to from sched.sp.
std::optional<CgoSwitch> systemstack_switch(const Code& code) {
  constexpr std::array<uint8_t, 2> kCallRdi = {0xff, 0xd7};
  constexpr std::array<uint8_t, 4> kGMToBx = {0x48, 0x8b, 0x58, kGM};
  constexpr std::array<uint8_t, 3> kCurgToAx = {0x48, 0x8b, 0x83};
  constexpr std::array<uint8_t, 4> kSchedSpToSp = {0x48, 0x8b, 0x60, kGSchedSp};
  constexpr std::array<uint8_t, 3> kFieldToBp = {0x48, 0x8b, 0x68};
  constexpr std::array<uint8_t, 3> kZeroField = {0x48, 0xc7, 0x40};  // disp8, then imm32 0
  const std::optional<size_t> call = code.find(0, kCallRdi);
  if (!call) return std::nullopt;
  size_t at = *call + kCallRdi.size();
  const uint64_t return_address = code.address(at);
  const std::optional<TlsAccess> g = g_from_tls(code, at);
  if (!g) return std::nullopt;
  at += g->length;
  if (!code.has(at, kGMToBx) || !code.has(at + 4, kCurgToAx)) return std::nullopt;
  const std::optional<int32_t> curg = code.s32(at + 4 + kCurgToAx.size());
  if (!curg || *curg <= 0 || *curg % 8 || *curg / 8 > UINT8_MAX) return std::nullopt;
  at += 4 + kCurgToAx.size() + 4;
  const std::optional<size_t> store = g_to_tls(code, at, g->offset);
  if (!store) return std::nullopt;
  at += *store;
  if (!code.has(at, kSchedSpToSp)) return std::nullopt;
  at += kSchedSpToSp.size();
  // What else the way back does to the old g (its sched.bp into rbp, fields cleared).
  for (int moves = 0; moves < 4; ++moves) {
    if (code.has(at, kFieldToBp))
      at += 4;
    else if (code.has(at, kZeroField) && code.s32(at + 4) == 0)
      at += 8;
    else
      break;
  }
  const bool pops_rbp = code.byte(at) == 0x5d && code.byte(at + 1) == 0xc3;
  if (!pops_rbp && code.byte(at) != 0xc3) return std::nullopt;
  CgoSwitch found{CgoSwitchKind::kSystemStack, return_address, pops_rbp ? 16 : 8, pops_rbp,
                  g->offset};
  found.curg_offset = static_cast<uint32_t>(*curg);
  return found;
}

// morestack's call of newstack on the system stack: sp = g0.sched.sp (`mov 0x38(%rbx),%rsp`),
// in current releases rbp = g0.sched.bp (`mov d8(%rbx),%rbp`), then `call newstack`. The
// goroutine whose stack grows is m.curg: morestack saved in its sched.sp the sp of the function
// that called it, whose return address lies just below. rbp is not known there (current
// releases replace it), which Go's frames do not need.
std::optional<CgoSwitch> morestack_switch(const Code& code, const CgoSwitch& systemstack) {
  constexpr std::array<uint8_t, 4> kSchedSpToSp = {0x48, 0x8b, 0x63, kGSchedSp};
  constexpr std::array<uint8_t, 2> kFieldToBp = {0x48, 0x8b};
  const std::optional<size_t> switched = code.find(0, kSchedSpToSp);
  if (!switched) return std::nullopt;
  size_t at = *switched + kSchedSpToSp.size();
  if (code.has(at, kFieldToBp) && code.byte(at + 2) == 0x6b) at += 4;
  if (code.byte(at) != 0xe8 || !code.s32(at + 1)) return std::nullopt;
  CgoSwitch found{CgoSwitchKind::kSystemStack, code.address(at + 5), 0, false, systemstack.slot,
                  systemstack.curg_offset};
  found.rbp_lost = true;
  return found;
}

bool named(std::string_view name, std::string_view function) {
  return name == function || (name.size() == function.size() + 5 && name.starts_with(function) &&
                              name.ends_with(".abi0"));
}

}  // namespace

std::vector<CgoSwitch> find_cgo_switches(std::string_view name, uint64_t entry,
                                         std::span<const uint8_t> code, const FrameLayout& layout,
                                         const CgoSwitch* systemstack) {
  const Code function(entry, code);
  if (named(name, "runtime.asmcgocall")) return asmcgocall_switches(function, layout);
  std::optional<CgoSwitch> found;
  if (named(name, "runtime.cgocallback")) found = cgocallback_switch(function, layout);
  if (named(name, "runtime.systemstack")) found = systemstack_switch(function);
  if (named(name, "runtime.morestack") && systemstack &&
      systemstack->kind == CgoSwitchKind::kSystemStack)
    found = morestack_switch(function, *systemstack);
  if (found) return {*found};
  return {};
}

std::optional<CgoSwitch> systemstack_switch(const GoTable& table, const ReadCode& code) {
  for (size_t i = 0; i < table.function_count(); ++i) {
    const std::optional<GoFunction> f = table.function(i);
    if (!f || f->end <= f->entry || !f->name.starts_with("runtime.systemstack")) continue;
    const std::optional<FrameLayout> layout = table.frame_layout(i);
    if (!layout) continue;
    for (const CgoSwitch& found :
         find_cgo_switches(f->name, f->entry, code(f->entry, f->end - f->entry), *layout))
      if (found.kind == CgoSwitchKind::kSystemStack) return found;
  }
  return std::nullopt;
}

}  // namespace bpfprof::go
