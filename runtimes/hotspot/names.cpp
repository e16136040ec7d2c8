#include "runtimes/hotspot/names.h"

namespace bpfprof::hotspot {

namespace {
// The names HotSpot gives compiled Java methods' blobs (nmethod's constructors): compiled
// code, and the wrappers of native methods (System.nanoTime, JNI).
constexpr std::string_view kNmethodBlobName = "nmethod";
constexpr std::string_view kNativeNmethodBlobName = "native nmethod";
constexpr size_t kMaxBlobName = 256;
}  // namespace

std::optional<JavaFrameName> JavaFrameNamer::name(const bpfprof_hotspot_frame& frame) {
  if (frame.kind == BPFPROF_HOTSPOT_FRAME_INTERPRETED) return method_name(frame.method);
  if (frame.kind != BPFPROF_HOTSPOT_FRAME_COMPILED && frame.kind != BPFPROF_HOTSPOT_FRAME_STUB)
    return std::nullopt;
  const std::optional<std::string> blob = blob_name(frame.aux);
  if (!blob) return std::nullopt;
  if (frame.kind == BPFPROF_HOTSPOT_FRAME_COMPILED &&
      (*blob == kNmethodBlobName || *blob == kNativeNmethodBlobName))
    return method_name(frame.method);
  return JavaFrameName{*blob, false};
}

std::optional<JavaFrameName> JavaFrameNamer::method_name(uint64_t method) {
  if (auto it = methods_.find(method); it != methods_.end()) return it->second;
  if (methods_.size() >= kMaxCached) methods_.clear();
  RemoteReader reader(memory_, kMethodReadBudget, kMaxBlobName);
  ++methods_read_;
  const auto read = read_method_name(reader, layout_, method);
  std::optional<JavaFrameName> named;
  if (const auto* name = std::get_if<JavaMethodName>(&read)) named = {name->qualified(), true};
  // A failure is kept too: a Method* that did not read now is being freed or is not one.
  methods_.emplace(method, named);
  return named;
}

std::optional<std::string> JavaFrameNamer::blob_name(uint64_t name) {
  if (auto it = blob_names_.find(name); it != blob_names_.end()) return it->second;
  if (blob_names_.size() >= kMaxCached) blob_names_.clear();
  RemoteReader reader(memory_, kMaxBlobName, kMaxBlobName);
  std::optional<std::string> text = name ? reader.c_string(name) : std::nullopt;
  blob_names_.emplace(name, text);
  return text;
}

}  // namespace bpfprof::hotspot
