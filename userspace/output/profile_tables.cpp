#include "userspace/output/profile_tables.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace bpfprof {

namespace {

template <typename T, typename F>
void write_column(JsonWriter& w, std::string_view name, const std::vector<T>& rows, F value) {
  w.key(name);
  w.begin_array();
  for (const T& row : rows) value(row);
  w.end_array();
}

// A column the front end requires but bpfprof has nothing for.
void write_nulls(JsonWriter& w, std::string_view name, size_t n) {
  w.key(name);
  w.begin_array();
  for (size_t i = 0; i < n; ++i) w.null();
  w.end_array();
}

void write_length(JsonWriter& w, size_t n) {
  w.key("length");
  w.number(static_cast<uint64_t>(n));
}

template <typename Index>
void number_or_null(JsonWriter& w, const std::optional<Index>& index) {
  if (index)
    w.number(uint64_t{index->value});
  else
    w.null();
}

// The front end's convention for "no index" in integer columns (lib, resource).
template <typename Index>
int64_t index_or_minus_one(const std::optional<Index>& index) {
  return index ? int64_t{index->value} : -1;
}

}  // namespace

void write_empty_table(JsonWriter& w, std::string_view name,
                       std::initializer_list<const char*> columns) {
  w.key(name);
  w.begin_object();
  for (const char* column : columns) {
    w.key(column);
    w.begin_array();
    w.end_array();
  }
  write_length(w, 0);
  w.end_object();
}

void write_string_array(JsonWriter& w, const StringTable& strings) {
  w.key("stringArray");
  w.begin_array();
  for (const std::string& s : strings.strings()) w.string(s);
  w.end_array();
}

LibIndex LibTable::add(LibraryDescription library) {
  libs_.push_back(std::move(library));
  return LibIndex{static_cast<uint32_t>(libs_.size() - 1)};
}

void LibTable::write_json(JsonWriter& w) const {
  w.key("libs");
  w.begin_array();
  for (const LibraryDescription& d : libs_) {
    w.begin_object();
    w.field("arch", d.arch);
    w.field("name", d.name);
    w.field("path", d.path);
    w.field("debugName", d.debug_name);
    w.field("debugPath", d.debug_path);
    w.field("breakpadId", d.breakpad_id);
    w.key("codeId");
    if (d.code_id.empty())
      w.null();
    else
      w.string(d.code_id);
    w.end_object();
  }
  w.end_array();
}

ResourceIndex ResourceTable::add(StringIndex name) {
  names_.push_back(name);
  return ResourceIndex{static_cast<uint32_t>(names_.size() - 1)};
}

void ResourceTable::write_json(JsonWriter& w) const {
  w.key("resourceTable");
  w.begin_object();
  write_column(w, "name", names_, [&](StringIndex s) { w.number(uint64_t{s.value}); });
  write_nulls(w, "host", names_.size());
  write_column(w, "type", names_, [&](StringIndex) { w.number(int64_t{1}); });  // library
  write_length(w, names_.size());
  w.end_object();
}

SourceIndex SourceTable::add(StringTable& strings, const std::string& filename) {
  auto [it, inserted] =
      index_.try_emplace(filename, SourceIndex{static_cast<uint32_t>(filenames_.size())});
  if (inserted) filenames_.push_back(strings.intern(filename));
  return it->second;
}

void SourceTable::set_content(SourceIndex i, std::string text) {
  contents_.resize(filenames_.size());
  contents_[i.value] = std::move(text);
}

void SourceTable::write_json(JsonWriter& w) const {
  w.key("sources");
  w.begin_object();
  write_nulls(w, "id", filenames_.size());
  write_column(w, "filename", filenames_,
               [&](StringIndex name) { w.number(uint64_t{name.value}); });
  write_column(w, "startLine", filenames_, [&](StringIndex) { w.number(int64_t{1}); });
  write_column(w, "startColumn", filenames_, [&](StringIndex) { w.number(int64_t{1}); });
  write_nulls(w, "sourceMapURL", filenames_.size());
  w.key("content");
  w.begin_array();
  for (size_t i = 0; i < filenames_.size(); ++i) {
    if (i < contents_.size() && contents_[i])
      w.string(*contents_[i]);
    else
      w.null();
  }
  w.end_array();
  write_length(w, filenames_.size());
  w.end_object();
}

FuncIndex FuncTable::add(StringTable& strings, std::string_view name,
                         std::optional<ResourceIndex> resource, std::optional<SourceIndex> source) {
  auto [it, inserted] = index_.try_emplace(
      {index_or_minus_one(resource), std::string(name), index_or_minus_one(source), -1},
      FuncIndex{static_cast<uint32_t>(funcs_.size())});
  if (inserted) funcs_.push_back(Func{strings.intern(name), resource, source});
  return it->second;
}

FuncIndex FuncTable::add_script(StringTable& strings, std::string_view name, SourceIndex source,
                                uint32_t first_line) {
  auto [it, inserted] =
      index_.try_emplace({-1, std::string(name), int64_t{source.value}, int64_t{first_line}},
                         FuncIndex{static_cast<uint32_t>(funcs_.size())});
  // Lines count from 1: 0 is a runtime's "not known" (a script whose source was not read).
  if (inserted)
    funcs_.push_back(Func{strings.intern(name), std::nullopt, source, true,
                          first_line ? std::optional<uint32_t>(first_line) : std::nullopt});
  return it->second;
}

void FuncTable::write_json(JsonWriter& w) const {
  w.key("funcTable");
  w.begin_object();
  write_column(w, "name", funcs_, [&](const Func& f) { w.number(uint64_t{f.name.value}); });
  write_column(w, "isJS", funcs_, [&](const Func& f) { w.boolean(f.is_script); });
  write_column(w, "relevantForJS", funcs_, [&](const Func&) { w.boolean(false); });
  write_column(w, "resource", funcs_,
               [&](const Func& f) { w.number(index_or_minus_one(f.resource)); });
  write_column(w, "source", funcs_, [&](const Func& f) { number_or_null(w, f.source); });
  write_column(w, "lineNumber", funcs_, [&](const Func& f) {
    if (f.line_number)
      w.number(*f.line_number);
    else
      w.null();
  });
  write_nulls(w, "columnNumber", funcs_.size());
  write_nulls(w, "originalLocation", funcs_.size());
  write_length(w, funcs_.size());
  w.end_object();
}

NativeSymbolIndex NativeSymbolTable::add(StringTable& strings, LibIndex lib, uint64_t address,
                                         const std::string& name, uint64_t size) {
  auto [it, inserted] = index_.try_emplace(
      {lib.value, address}, NativeSymbolIndex{static_cast<uint32_t>(symbols_.size())});
  if (inserted) symbols_.push_back(Symbol{lib, address, strings.intern(name), size});
  return it->second;
}

void NativeSymbolTable::write_json(JsonWriter& w) const {
  w.key("nativeSymbols");
  w.begin_object();
  write_column(w, "libIndex", symbols_, [&](const Symbol& s) { w.number(uint64_t{s.lib.value}); });
  write_column(w, "address", symbols_, [&](const Symbol& s) { w.number(s.address); });
  write_column(w, "name", symbols_, [&](const Symbol& s) { w.number(uint64_t{s.name.value}); });
  write_column(w, "functionSize", symbols_, [&](const Symbol& s) {
    if (s.size == 0)
      w.null();
    else
      w.number(s.size);
  });
  write_length(w, symbols_.size());
  w.end_object();
}

FrameIndex FrameTable::add(const Frame& frame) {
  frames_.push_back(frame);
  return FrameIndex{static_cast<uint32_t>(frames_.size() - 1)};
}

void FrameTable::write_json(JsonWriter& w) const {
  w.key("frameTable");
  w.begin_object();
  write_column(w, "address", frames_, [&](const Frame& f) {
    w.number(f.address ? int64_t{*f.address} : -1);  // -1: no address
  });
  write_column(w, "lib", frames_, [&](const Frame& f) { w.number(index_or_minus_one(f.lib)); });
  write_column(w, "inlineDepth", frames_, [&](const Frame& f) { w.number(f.inline_depth); });
  write_column(w, "category", frames_,
               [&](const Frame& f) { w.number(static_cast<int64_t>(f.category)); });
  write_column(w, "subcategory", frames_, [&](const Frame&) { w.number(int64_t{0}); });
  write_column(w, "func", frames_, [&](const Frame& f) { w.number(uint64_t{f.func.value}); });
  write_column(w, "nativeSymbol", frames_,
               [&](const Frame& f) { number_or_null(w, f.native_symbol); });
  write_column(w, "innerWindowID", frames_, [&](const Frame&) { w.number(int64_t{0}); });
  write_column(w, "line", frames_, [&](const Frame& f) {
    if (f.line)
      w.number(*f.line);
    else
      w.null();
  });
  write_nulls(w, "column", frames_.size());
  write_nulls(w, "originalLocation", frames_.size());
  write_length(w, frames_.size());
  w.end_object();
}

StackIndex StackTable::add(std::optional<StackIndex> prefix, FrameIndex frame) {
  const auto parent = prefix ? prefix->value : PrefixTree<uint32_t>::kRoot;
  return StackIndex{tree_.intern(parent, frame.value)};
}

std::optional<StackIndex> StackTable::prefix(StackIndex i) const {
  const auto parent = tree_.node(i.value).parent;
  if (parent == PrefixTree<uint32_t>::kRoot) return std::nullopt;
  return StackIndex{parent};
}

void StackTable::write_json(JsonWriter& w) const {
  const auto& nodes = tree_.nodes();
  w.key("stackTable");
  w.begin_object();
  write_column(w, "frame", nodes, [&](const auto& node) { w.number(uint64_t{node.key}); });
  // The parent as a distance back from the node (0: a root), as format 70 stores it.
  w.key("prefixOffset");
  w.begin_array();
  for (size_t i = 0; i < nodes.size(); ++i) {
    const auto parent = nodes[i].parent;
    w.number(parent == PrefixTree<uint32_t>::kRoot ? uint64_t{0}
                                                   : static_cast<uint64_t>(i - parent));
  }
  w.end_array();
  write_length(w, nodes.size());
  w.end_object();
}

void SharedTables::write_json(JsonWriter& w) const {
  w.key("shared");
  w.begin_object();
  stacks.write_json(w);
  frames.write_json(w);
  funcs.write_json(w);
  resources.write_json(w);
  native_symbols.write_json(w);
  sources.write_json(w);
  write_empty_table(w, "sourceLocationTable", {"source", "line", "column"});
  write_string_array(w, strings);
  w.end_object();
}

std::optional<StackIndex> output_stack(const std::vector<StackIndex>& output_stack_of,
                                       StackId stack) {
  if (stack == ResolvedStackTree::kRoot) return std::nullopt;
  return output_stack_of[stack];
}

// Microsecond precision is what the front end shows, and shorter numbers write and compress
// faster than nanoseconds.
double profile_time_ms(MonotonicNs zero, MonotonicNs time) {
  return std::round(ms_between(zero, time) * 1000.0) / 1000.0;
}

std::optional<StackIndex> SamplesTable::stack_at(size_t i) const {
  return output_stack(*output_stack_of_, (*samples_)[i].stack);
}

double SamplesTable::time_ms_at(size_t i) const {
  return profile_time_ms(zero_, (*samples_)[i].time);
}

SamplesTable::Sample SamplesTable::row(size_t i) const {
  const ThreadSample& s = (*samples_)[i];
  return Sample{stack_at(i), time_ms_at(i), s.cpu_delta_ns, s.weight};
}

template <typename F>
void SamplesTable::write_column(JsonWriter& w, std::string_view name, F value) const {
  w.key(name);
  w.begin_array();
  for (size_t i = 0; i < size(); ++i) value(i);
  w.end_array();
}

void SamplesTable::write_json(JsonWriter& w) const {
  w.key("samples");
  w.begin_object();
  write_column(w, "stack", [&](size_t i) { number_or_null(w, stack_at(i)); });
  write_column(w, "time", [&](size_t i) { w.number(time_ms_at(i)); });
  write_column(w, "threadCPUDelta", [&](size_t i) { w.number((*samples_)[i].cpu_delta_ns); });
  // All weights 1 (the common case without collapsing or off-CPU samples): null is shorter.
  const bool weighted =
      samples_ && std::any_of(samples_->begin(), samples_->end(),
                              [](const ThreadSample& s) { return s.weight != 1.0; });
  if (weighted) {
    write_column(w, "weight", [&](size_t i) { w.number((*samples_)[i].weight); });
  } else {
    w.key("weight");
    w.null();
  }
  w.field("weightType", "samples");
  write_length(w, size());
  w.end_object();
}

namespace {

// The front end shows a cause's stack in the tooltip and the sidebar.
void write_cause(JsonWriter& w, std::optional<StackIndex> stack, double time_ms) {
  if (!stack) return;
  w.key("cause");
  w.begin_object();
  w.key("stack");
  w.number(uint64_t{stack->value});
  w.key("time");
  w.number(time_ms);
  w.end_object();
}

void write_marker_data(JsonWriter& w, const MarkersTable::EventsLost& lost, double) {
  w.field("type", MarkersTable::kEventsLostType);
  w.field("count", lost.count);
  w.field("process", lost.process);
}

void write_marker_data(JsonWriter& w, const MarkersTable::Woken& woken, double end_ms) {
  w.field("type", MarkersTable::kWokenType);
  w.field("state", woken.state);
  w.key("duration");
  w.number(woken.duration_ms);
  w.field("waker", woken.waker);
  w.field("wakerThread", woken.waker_thread);
  if (woken.waker_tid) {
    w.key("wakerTid");
    w.number(int64_t{*woken.waker_tid});
  }
  if (!woken.waker_process.empty()) w.field("wakerProcess", woken.waker_process);
  write_cause(w, woken.cause, end_ms);
}

void write_marker_data(JsonWriter& w, const MarkersTable::AddressSpaceChange& change,
                       double time_ms) {
  w.field("type", MarkersTable::kAddressSpaceType);
  w.field("call", change.call);
  w.field("direction", change.change < 0 ? "shrank" : "grew");
  // Signed (what a reader sums), and as sizes for the labels: the front end writes a negative
  // byte count unscaled.
  w.key("change");
  w.number(change.change);
  w.key("sampledBytes");
  w.number(change.sampled_bytes);
  w.key("size");
  w.number(static_cast<uint64_t>(std::abs(change.change)));
  w.key("standsFor");
  w.number(static_cast<uint64_t>(std::abs(change.sampled_bytes)));
  char address[32];
  snprintf(address, sizeof address, "0x%llx", static_cast<unsigned long long>(change.address));
  w.field("address", address);
  write_cause(w, change.cause, time_ms);
}

}  // namespace

void MarkersTable::write_json(JsonWriter& w) const {
  w.key("markers");
  w.begin_object();
  write_column(w, "data", markers_, [&](const Marker& m) {
    w.begin_object();
    std::visit([&](const auto& data) { write_marker_data(w, data, m.end_ms.value_or(m.start_ms)); },
               m.data);
    w.end_object();
  });
  write_column(w, "name", markers_, [&](const Marker& m) { w.number(uint64_t{m.name.value}); });
  write_column(w, "startTime", markers_, [&](const Marker& m) { w.number(m.start_ms); });
  write_column(w, "endTime", markers_, [&](const Marker& m) {
    if (m.end_ms)
      w.number(*m.end_ms);
    else
      w.null();
  });
  // 1: an interval, 0: an instant.
  write_column(w, "phase", markers_, [&](const Marker& m) { w.number(int64_t{m.end_ms ? 1 : 0}); });
  write_column(w, "category", markers_, [&](const Marker&) { w.number(int64_t{0}); });
  write_length(w, markers_.size());
  w.end_object();
}

namespace {

struct SchemaText {
  const char* name;
  const char* chart_label;
  const char* tooltip_label;
  const char* table_label;
  const char* description;
};
struct SchemaField {
  const char* key;
  const char* label;
  const char* format;
};

// A meta.markerSchema entry, shown in the marker chart, the marker table and the timeline.
void write_schema(JsonWriter& w, const SchemaText& text,
                  std::initializer_list<SchemaField> fields) {
  w.begin_object();
  w.field("name", text.name);
  w.key("display");
  w.begin_array();
  for (const char* where : {"marker-chart", "marker-table", "timeline-overview"}) w.string(where);
  w.end_array();
  w.field("chartLabel", text.chart_label);
  w.field("tooltipLabel", text.tooltip_label);
  w.field("tableLabel", text.table_label);
  w.field("description", text.description);
  w.key("fields");
  w.begin_array();
  for (const SchemaField& field : fields) {
    w.begin_object();
    w.field("key", field.key);
    w.field("label", field.label);
    w.field("format", field.format);
    w.end_object();
  }
  w.end_array();
  w.end_object();
}

}  // namespace

void MarkersTable::write_events_lost_schema(JsonWriter& w) {
  write_schema(w,
               {kEventsLostType, "{marker.data.count} events lost",
                "{marker.data.count} events lost (ring buffer full)",
                "{marker.data.count} events lost in {marker.data.process}",
                "Samples and other events of this process that bpfprof lost because its ring "
                "buffer was full (noticed within ~100 ms after they happened); try a larger "
                "--buffer-size or a lower -F."},
               {{"count", "Events lost", "integer"}, {"process", "Process", "string"}});
}

void MarkersTable::write_woken_schema(JsonWriter& w) {
  write_schema(w,
               {kWokenType, "{marker.data.waker}",
                "{marker.data.state} {marker.data.duration}, woken by {marker.data.waker}",
                "{marker.data.state} {marker.data.duration}, woken by {marker.data.waker}",
                "A wait of this thread, from the moment it left the CPU to the moment something "
                "woke it: another thread (its name, tid and process; its stack as the cause) or "
                "an interrupt (the kernel function that woke it). Waits shorter than "
                "--wake-threshold have no marker."},
               {{"state", "State", "string"},
                {"duration", "Waited", "duration"},
                {"waker", "Woken by", "string"},
                {"wakerThread", "Waker thread", "string"},
                {"wakerTid", "Waker tid", "integer"},
                {"wakerProcess", "Waker process", "string"}});
}

void MarkersTable::write_address_space_schema(JsonWriter& w) {
  write_schema(w,
               {kAddressSpaceType, "{marker.data.call} {marker.data.size}",
                "{marker.data.call}: {marker.data.direction} by {marker.data.size} at "
                "{marker.data.address}",
                "{marker.data.call} {marker.data.direction} by {marker.data.size} at "
                "{marker.data.address}",
                "record --memory: a system call of this thread that grew the address space "
                "(mmap, brk, mremap) or shrank it (munmap, brk, mremap), with its caller's "
                "stack. Calls are sampled by bytes, one per MiB changed on average: each stands "
                "for the bytes in 'Stands for'."},
               {{"call", "Call", "string"},
                {"direction", "Address space", "string"},
                {"size", "Size", "bytes"},
                {"address", "Address", "string"},
                {"standsFor", "Stands for", "bytes"}});
}

}  // namespace bpfprof
