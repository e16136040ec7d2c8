#include "symbols/go/labels_layout.h"

#include <algorithm>
#include <array>
#include <cstring>

namespace bpfprof::go {
namespace {

// runtime_setProfLabel is a few dozen bytes; its store comes early.
constexpr size_t kMaxSetterCode = 256;
// g is some 400 bytes in every release: an offset past this is not g.labels.
constexpr uint32_t kMaxGOffset = 1024;
constexpr uint32_t kFirstSliceRelease = 24;
constexpr uint32_t kFirstRegisterAbiRelease = 17;
// g's slot lies just below the thread pointer (-8 without cgo, a TLS variable's offset with
// it), and m.curg in the first few hundred bytes of m.
constexpr int32_t kMaxGSlotDistance = 1 << 16;
constexpr uint32_t kMaxMOffset = 2048;

}  // namespace

std::optional<uint32_t> labels_offset_from_code(std::span<const uint8_t> code) {
  code = code.first(std::min(code.size(), kMaxSetterCode));
  // The first load or store of a word at disp32(%r14): `mov %rax,disp32(%r14)` (1.19), or the
  // write barrier's read of the old value, `mov disp32(%r14),%rcx` (1.2x).
  for (size_t at = 0; at + 7 <= code.size(); ++at) {
    const bool rex_wb = code[at] == 0x49 || code[at] == 0x4d;
    const bool mov = code[at + 1] == 0x89 || code[at + 1] == 0x8b;
    const bool r14_disp32 = (code[at + 2] & 0xc7) == 0x86;
    if (!rex_wb || !mov || !r14_disp32) continue;
    int32_t offset;
    memcpy(&offset, code.data() + at + 3, sizeof offset);
    if (offset <= 0 || static_cast<uint32_t>(offset) >= kMaxGOffset || offset % 8)
      return std::nullopt;
    return static_cast<uint32_t>(offset);
  }
  return std::nullopt;
}

std::optional<LabelsLayout> labels_layout(std::optional<uint32_t> g_labels,
                                          std::optional<GoRelease> release) {
  if (!g_labels || !release || !release->at_least(kFirstRegisterAbiRelease)) return std::nullopt;
  return LabelsLayout{
      *g_labels, release->at_least(kFirstSliceRelease) ? LabelsForm::kSlice : LabelsForm::kMap};
}

std::optional<GoFunction> function_named(const GoTable& table, std::string_view name) {
  for (size_t i = 0; i < table.function_count(); ++i)
    if (std::optional<GoFunction> f = table.function(i); f && f->name == name) return f;
  return std::nullopt;
}

std::optional<LabelsSite> labels_site(const GoTable& table, const ReadCode& code) {
  const std::optional<GoFunction> setter = function_named(table, kSetProfLabel);
  if (!setter || setter->end <= setter->entry) return std::nullopt;
  const std::vector<uint8_t> setter_code =
      code(setter->entry, std::min<uint64_t>(setter->end - setter->entry, kMaxSetterCode));
  const std::optional<LabelsLayout> layout =
      labels_layout(labels_offset_from_code(setter_code), table.release());
  const std::optional<CgoSwitch> systemstack = systemstack_switch(table, code);
  if (!layout || !systemstack || systemstack->slot <= -kMaxGSlotDistance ||
      systemstack->slot >= kMaxGSlotDistance || systemstack->curg_offset == 0 ||
      systemstack->curg_offset >= kMaxMOffset)
    return std::nullopt;
  return LabelsSite{systemstack->slot, systemstack->curg_offset, *layout};
}

}  // namespace bpfprof::go
