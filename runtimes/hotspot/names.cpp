#include "runtimes/hotspot/names.h"

namespace bpfprof::hotspot {

namespace {
// The names HotSpot gives compiled Java methods' blobs (nmethod's constructors): compiled
// code, and the wrappers of native methods (System.nanoTime, JNI).
constexpr std::string_view kNmethodBlobName = "nmethod";
constexpr std::string_view kNativeNmethodBlobName = "native nmethod";
constexpr size_t kMaxBlobName = 256;
}  // namespace

std::vector<JavaFrameName> JavaFrameNamer::name(const bpfprof_hotspot_frame& frame, uint64_t pc) {
  std::optional<JavaFrameName> named;
  if (frame.kind == BPFPROF_HOTSPOT_FRAME_INTERPRETED) {
    const std::optional<MethodCode>& code = method_code(frame.method);
    named = method_at(frame.method, code ? code->bci_of(frame.aux) : -1);
  } else if (frame.kind == BPFPROF_HOTSPOT_FRAME_COMPILED) {
    return compiled(frame, pc);
  } else if (frame.kind == BPFPROF_HOTSPOT_FRAME_STUB) {
    if (const std::optional<std::string> blob = blob_name(frame.aux))
      named = JavaFrameName{*blob, false};
  }
  if (!named) return {};
  return {std::move(*named)};
}

// A blob with a frame size: an nmethod's scopes at the pc (its method and those inlined
// into it), else its name (a runtime stub's). Both are read from the process; when they do
// not read (the process has exited: its last samples are often read after that; the blob
// freed or reused), the method the walk read, named earlier, without a line.
std::vector<JavaFrameName> JavaFrameNamer::compiled(const bpfprof_hotspot_frame& frame,
                                                    uint64_t pc) {
  RemoteReader reader(memory_, kDebugInfoReadBudget, kMaxBlobName);
  const std::optional<uint64_t> name_pointer = reader.word(frame.aux + layout_.blob_name);
  const std::optional<std::string> blob = name_pointer ? blob_name(*name_pointer) : std::nullopt;
  if (!blob) return walked_method(frame.method);
  if (*blob != kNmethodBlobName && *blob != kNativeNmethodBlobName) return {{*blob, false}};
  std::vector<JavaFrameName> out;
  const PcKind kind = frame.depth == 0 ? PcKind::kLeaf : PcKind::kReturnAddress;
  const auto scopes = read_compiled_scopes(reader, layout_, frame.aux, frame.method, pc, kind);
  if (const auto* read = std::get_if<std::vector<JavaScope>>(&scopes)) {
    for (const JavaScope& scope : *read) {
      std::optional<JavaFrameName> named = method_at(scope.method, scope.bci);
      if (!named) break;
      out.push_back(std::move(*named));
    }
    if (out.size() == read->size()) return out;
  }
  return walked_method(frame.method);  // or a call without debug info (into a stub)
}

std::vector<JavaFrameName> JavaFrameNamer::walked_method(uint64_t method) {
  std::optional<JavaFrameName> named = method_name(method);
  if (!named) return {};
  return {std::move(*named)};
}

std::optional<JavaFrameName> JavaFrameNamer::method_at(uint64_t method, int32_t bci) {
  std::optional<JavaFrameName> named = method_name(method);
  if (!named || bci < 0) return named;
  const std::optional<MethodCode>& code = method_code(method);
  if (code && code->lines) named->line = code->lines->line_at(bci);
  return named;
}

const std::optional<MethodCode>& JavaFrameNamer::method_code(uint64_t method) {
  if (auto it = codes_.find(method); it != codes_.end()) return it->second;
  if (codes_.size() >= kMaxCached || code_entries_ >= kMaxLineEntries) {
    codes_.clear();
    code_entries_ = 0;
  }
  RemoteReader reader(memory_, kDebugInfoReadBudget, kMaxBlobName);
  std::optional<MethodCode> code;
  if (layout_.debug_info) {
    auto read = read_method_code(reader, layout_, method);
    if (auto* got = std::get_if<MethodCode>(&read)) code = std::move(*got);
  }
  if (code && code->lines) code_entries_ += code->lines->size();
  return codes_.emplace(method, std::move(code)).first->second;
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
