// Where a running goroutine's pprof labels are (pprof.Do, pprof.SetGoroutineLabels): g.labels
// points at them, and their form changed in Go 1.24. g.labels's offset is read from the code
// of runtime/pprof.runtime_setProfLabel (the runtime's `getg().labels = labels`, which every
// label setter goes through: a binary without it has no labels), the form from the release.
// The code comes from any binary: a function of another shape gives nothing.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "symbols/go/cgo_switches.h"
#include "symbols/go/go_release.h"
#include "symbols/go/pclntab.h"

namespace bpfprof::go {

enum class LabelsForm : uint8_t {
  kMap,    // up to 1.23: *map[string]string (runtime hmap, 8-slot buckets)
  kSlice,  // 1.24 on: *struct{ list []struct{ key, value string } }, sorted by key
};

struct LabelsLayout {
  uint32_t g_labels = 0;  // offset of g.labels
  LabelsForm form = LabelsForm::kMap;
  bool operator==(const LabelsLayout&) const = default;
};

// The function whose code says where g.labels is.
inline constexpr std::string_view kSetProfLabel = "runtime/pprof.runtime_setProfLabel";

// g.labels's offset from runtime_setProfLabel's code: its store `mov %rax,disp32(%r14)` (r14
// holds g in Go's register ABI, 1.17+).
std::optional<uint32_t> labels_offset_from_code(std::span<const uint8_t> code);

// The layout, where both the offset and the release are known and the release has labels in
// g (1.9+; the register ABI the code is read by, 1.17+).
std::optional<LabelsLayout> labels_layout(std::optional<uint32_t> g_labels,
                                          std::optional<GoRelease> release);

// Where a Go binary's running goroutine's labels are, for the kernel side: g at the thread
// pointer + g_slot, the goroutine at m.curg (both from the binary's systemstack switch), and
// its labels at g.labels in `layout`'s form.
struct LabelsSite {
  int32_t g_slot = 0;
  uint32_t m_curg = 0;
  LabelsLayout layout;
};

// The first function of that name (a linear search: for a few names once per binary).
std::optional<GoFunction> function_named(const GoTable& table, std::string_view name);

// nullopt: the binary sets no labels (it has no runtime_setProfLabel), or its code is of a
// shape not known.
std::optional<LabelsSite> labels_site(const GoTable& table, const ReadCode& code);

}  // namespace bpfprof::go
