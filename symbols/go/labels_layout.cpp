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

}  // namespace

std::optional<uint32_t> labels_offset_from_code(std::span<const uint8_t> code) {
  constexpr std::array<uint8_t, 3> kStoreAxInR14 = {0x49, 0x89, 0x86};  // mov %rax,disp32(%r14)
  code = code.first(std::min(code.size(), kMaxSetterCode));
  for (size_t at = 0; at + kStoreAxInR14.size() + 4 <= code.size(); ++at) {
    if (memcmp(code.data() + at, kStoreAxInR14.data(), kStoreAxInR14.size()) != 0) continue;
    int32_t offset;
    memcpy(&offset, code.data() + at + kStoreAxInR14.size(), sizeof offset);
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

}  // namespace bpfprof::go
