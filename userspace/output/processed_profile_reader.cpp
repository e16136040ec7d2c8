#include "userspace/output/processed_profile_reader.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <istream>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "userspace/output/profile_libraries.h"

namespace bpfprof {

namespace {

using nlohmann::json;

[[noreturn]] void malformed(const std::string& what) {
  throw std::runtime_error("not a processed profile written by bpfprof: " + what);
}

const json& member(const json& object, const char* key) {
  if (!object.is_object() || !object.contains(key)) malformed(std::string("no ") + key);
  return object.at(key);
}

// A table's column, with at least `rows` entries (rows 0: any length).
const json& column(const json& table, const char* name, size_t rows = 0) {
  const json& values = member(table, name);
  if (!values.is_array() || values.size() < rows)
    malformed(std::string("column ") + name + " is not an array of the table's length");
  return values;
}

// An index column's entry: none for null or negative.
std::optional<uint32_t> index_at(const json& values, size_t row, size_t limit, const char* what) {
  const json& v = values[row];
  if (v.is_null() || (v.is_number_integer() && v.get<int64_t>() < 0)) return std::nullopt;
  if (!v.is_number_integer() || v.get<uint64_t>() >= limit)
    malformed(std::string(what) + " out of range");
  return static_cast<uint32_t>(v.get<uint64_t>());
}

double number_at(const json& values, size_t row, double absent) {
  const json& v = values[row];
  return v.is_number() ? v.get<double>() : absent;
}

// A number from the file as an unsigned integer in [0, max] (NaN: 0): a cast of a double
// out of range would be undefined.
uint64_t clamped(double value, double max) {
  return value > 0 ? static_cast<uint64_t>(std::min(value, max)) : 0;
}

double number_or(const json& object, const char* key, double absent) {
  return object.contains(key) && object.at(key).is_number() ? object.at(key).get<double>() : absent;
}

// A signed number of bytes from the file, within +-2^62.
int64_t signed_bytes(const json& object, const char* key) {
  const double value = number_or(object, key, 0);
  const auto magnitude = static_cast<int64_t>(clamped(std::fabs(value), 0x1p62));
  return value < 0 ? -magnitude : magnitude;
}

// Rebuilds the shared tables in their order; the maps give the new index of each old one
// (the tables intern, so two old rows can become one).
class TableReader {
 public:
  TableReader(const json& root, ReadProfile& out) : shared_(member(root, "shared")), out_(out) {}

  void read_libs(const json& libs);
  void read_shared();
  void read_thread(const json& thread);

 private:
  void read_samples(const json& samples, ThreadTables& out);
  void read_allocations(const json& allocations, ThreadTables& out);
  void read_address_space_markers(const json& markers, ThreadTables& out);
  const std::string& old_string(const json& values, size_t row) {
    return strings_[index_at(values, row, strings_.size(), "string index").value_or(0)];
  }
  void read_sources();
  void read_funcs();
  void read_native_symbols();
  void read_frames();
  void read_stacks();

  const json& shared_;
  ReadProfile& out_;
  std::vector<std::string> strings_;
  std::vector<SourceIndex> source_of_;
  std::vector<FuncIndex> func_of_;
  std::vector<NativeSymbolIndex> symbol_of_;
  std::vector<FrameIndex> frame_of_;
  std::shared_ptr<std::vector<StackIndex>> stack_of_ = std::make_shared<std::vector<StackIndex>>();
};

void TableReader::read_libs(const json& libs) {
  try {
    for (LibraryDescription& d : libraries_from_json(libs)) out_.profile.libs.add(std::move(d));
  } catch (const std::invalid_argument& e) {
    malformed(e.what());
  }
}

void TableReader::read_shared() {
  const json& strings = column(shared_, "stringArray");
  for (const json& s : strings) strings_.push_back(s.is_string() ? s.get<std::string>() : "");
  const json& resources = member(shared_, "resourceTable");
  for (size_t i = 0; i < column(resources, "name").size(); ++i)
    out_.profile.shared.resources.add(
        out_.profile.shared.strings.intern(old_string(column(resources, "name"), i)));
  read_sources();
  read_funcs();
  read_native_symbols();
  read_frames();
  read_stacks();
}

void TableReader::read_sources() {
  if (!shared_.contains("sources")) return;
  const json& filenames = column(member(shared_, "sources"), "filename");
  for (size_t i = 0; i < filenames.size(); ++i)
    source_of_.push_back(
        out_.profile.shared.sources.add(out_.profile.shared.strings, old_string(filenames, i)));
}

void TableReader::read_funcs() {
  SharedTables& t = out_.profile.shared;
  const json& funcs = member(shared_, "funcTable");
  const json& names = column(funcs, "name");
  const size_t rows = names.size();
  const json& resources = column(funcs, "resource", rows);
  const json& is_js = column(funcs, "isJS", rows);
  const json* sources = funcs.contains("source") ? &column(funcs, "source", rows) : nullptr;
  const json& lines = column(funcs, "lineNumber", rows);
  const uint32_t resource_count =
      static_cast<uint32_t>(column(member(shared_, "resourceTable"), "name").size());
  for (size_t i = 0; i < rows; ++i) {
    const std::string& name = old_string(names, i);
    std::optional<SourceIndex> source;
    if (sources)
      if (std::optional<uint32_t> s = index_at(*sources, i, source_of_.size(), "func source"))
        source = source_of_[*s];
    const double line = number_at(lines, i, -1);
    if (is_js[i].is_boolean() && is_js[i].get<bool>() && source && line >= 0) {
      func_of_.push_back(t.funcs.add_script(t.strings, name, *source,
                                            static_cast<uint32_t>(clamped(line, UINT32_MAX))));
      continue;
    }
    std::optional<ResourceIndex> resource;
    if (std::optional<uint32_t> r = index_at(resources, i, resource_count, "func resource"))
      resource = ResourceIndex{*r};
    func_of_.push_back(t.funcs.add(t.strings, name, resource, source));
  }
}

void TableReader::read_native_symbols() {
  SharedTables& t = out_.profile.shared;
  if (!shared_.contains("nativeSymbols")) return;
  const json& symbols = member(shared_, "nativeSymbols");
  const json& libs = column(symbols, "libIndex");
  const size_t rows = libs.size();
  const json& addresses = column(symbols, "address", rows);
  const json& names = column(symbols, "name", rows);
  const json& sizes = column(symbols, "functionSize", rows);
  for (size_t i = 0; i < rows; ++i) {
    const std::optional<uint32_t> lib =
        index_at(libs, i, out_.profile.libs.rows().size(), "symbol lib");
    if (!lib) malformed("a native symbol without a lib");
    symbol_of_.push_back(
        t.native_symbols.add(t.strings, LibIndex{*lib}, clamped(number_at(addresses, i, 0), 0x1p63),
                             old_string(names, i), clamped(number_at(sizes, i, 0), 0x1p63)));
  }
}

void TableReader::read_frames() {
  const json& frames = member(shared_, "frameTable");
  const json& funcs = column(frames, "func");
  const size_t rows = funcs.size();
  const json& addresses = column(frames, "address", rows);
  const json& categories = column(frames, "category", rows);
  const json& depths = column(frames, "inlineDepth", rows);
  const json& lines = column(frames, "line", rows);
  const json* libs = frames.contains("lib") ? &column(frames, "lib", rows) : nullptr;
  const json* symbols =
      frames.contains("nativeSymbol") ? &column(frames, "nativeSymbol", rows) : nullptr;
  for (size_t i = 0; i < rows; ++i) {
    FrameTable::Frame frame;
    const std::optional<uint32_t> func = index_at(funcs, i, func_of_.size(), "frame func");
    if (!func) malformed("a frame without a function");
    frame.func = func_of_[*func];
    const double address = number_at(addresses, i, -1);
    if (address >= 0 && address <= UINT32_MAX) frame.address = static_cast<uint32_t>(address);
    if (libs)
      if (std::optional<uint32_t> lib =
              index_at(*libs, i, out_.profile.libs.rows().size(), "frame lib"))
        frame.lib = LibIndex{*lib};
    const double category = number_at(categories, i, 0);
    if (category >= 0 && category < static_cast<double>(std::size(kCategories)))
      frame.category = static_cast<Category>(static_cast<int>(category));
    frame.inline_depth = static_cast<uint32_t>(clamped(number_at(depths, i, 0), UINT32_MAX));
    if (const double line = number_at(lines, i, -1); line >= 0)
      frame.line = static_cast<uint32_t>(clamped(line, UINT32_MAX));
    if (symbols)
      if (std::optional<uint32_t> s = index_at(*symbols, i, symbol_of_.size(), "frame symbol"))
        frame.native_symbol = symbol_of_[*s];
    frame_of_.push_back(out_.profile.shared.frames.add(frame));
  }
}

// Parents come before their children; format 70 stores them as offsets back (0: a root),
// older ones as indices (null: a root).
void TableReader::read_stacks() {
  const json& stacks = member(shared_, "stackTable");
  const json& frames = column(stacks, "frame");
  const size_t rows = frames.size();
  const bool offsets = stacks.contains("prefixOffset");
  const json& parents = column(stacks, offsets ? "prefixOffset" : "prefix", rows);
  for (size_t i = 0; i < rows; ++i) {
    std::optional<StackIndex> prefix;
    if (offsets) {
      const std::optional<uint32_t> back = index_at(parents, i, i + 1, "stack prefix");
      if (back && *back > 0) prefix = (*stack_of_)[i - *back];
    } else if (std::optional<uint32_t> parent = index_at(parents, i, i, "stack prefix")) {
      prefix = (*stack_of_)[*parent];
    }
    const std::optional<uint32_t> frame = index_at(frames, i, frame_of_.size(), "stack frame");
    if (!frame) malformed("a stack without a frame");
    stack_of_->push_back(out_.profile.shared.stacks.add(prefix, frame_of_[*frame]));
  }
}

// bpfprof's processContext of a thread (profile_writer.cpp), and its process's name without
// the context's label the writer added to it. What does not parse is left out.
void read_context_member(const json& object, ThreadTables& out) {
  if (!object.is_object()) return;
  auto text = [&](const char* key) {
    const auto it = object.find(key);
    return it != object.end() && it->is_string()
               ? it->get<std::string>().substr(0, kMaxCgroupPathBytes)
               : std::string();
  };
  ProcessContext& c = out.context;
  c.runtime = container_runtime_named(text("containerRuntime"));
  if (c.runtime) c.container_id = text("containerId");
  c.pod_uid = text("podUid");
  if (!c.pod_uid.empty()) c.qos = pod_qos_named(text("podQos"));
  c.service = text("service");
  c.cgroup = text("cgroup");
  if (const auto pid = object.find("namespacePid");
      pid != object.end() && pid->is_number_integer() && pid->get<int64_t>() > 0 &&
      pid->get<int64_t>() <= INT32_MAX)
    c.namespace_pid = static_cast<int32_t>(pid->get<int64_t>());
  const std::string plain = without_container(out.process_name, c);
  out.show_container = plain != out.process_name;
  out.process_name = plain;
}

void TableReader::read_thread(const json& thread) {
  ThreadTables out;
  out.name = string_member(thread, "name");
  out.process_name = string_member(thread, "processName");
  out.pid_string = string_member(thread, "pid");
  out.pid = Pid{atoi(out.pid_string.c_str())};
  out.tid = Tid{static_cast<int32_t>(clamped(number_or(thread, "tid", 0), INT32_MAX))};
  out.is_main_thread = thread.contains("isMainThread") && thread.at("isMainThread") == true;
  if (thread.contains("processContext")) read_context_member(thread.at("processContext"), out);
  read_samples(member(thread, "samples"), out);
  if (const auto it = thread.find("nativeAllocations"); it != thread.end())
    read_allocations(*it, out);
  if (const auto it = thread.find("markers"); it != thread.end())
    read_address_space_markers(*it, out);
  out_.profile.threads.push_back(std::move(out));
}

void TableReader::read_samples(const json& samples, ThreadTables& out) {
  const json& stacks = column(samples, "stack");
  const size_t rows = stacks.size();
  const json& times = column(samples, "time", rows);
  const bool has_cpu = samples.contains("threadCPUDelta");
  const json* cpu = has_cpu ? &column(samples, "threadCPUDelta", rows) : nullptr;
  const bool weighted = samples.contains("weight") && samples.at("weight").is_array();
  const json* weights = weighted ? &column(samples, "weight", rows) : nullptr;
  std::vector<ThreadSample>& rows_out = out_.samples.emplace_back();
  for (size_t i = 0; i < rows; ++i) {
    ThreadSample s;
    s.time = MonotonicNs{clamped(number_at(times, i, 0) * 1e6, 0x1p63)};
    s.stack = index_at(stacks, i, stack_of_->size(), "sample stack").value_or(UINT32_MAX);
    s.cpu_delta_ns = cpu ? clamped(number_at(*cpu, i, 0), 0x1p62) : 0;
    s.weight = weights ? number_at(*weights, i, 1.0) : 1.0;
    rows_out.push_back(s);
  }
  out.samples = SamplesTable(rows_out, stack_of_, MonotonicNs{0});
}

// record --memory's rows (the unbalanced form: time, stack, bytes) and --allocations' (the
// balanced form: with each block's address; frees negative).
void TableReader::read_allocations(const json& allocations, ThreadTables& out) {
  const json& stacks = column(allocations, "stack");
  const size_t rows = stacks.size();
  const json& times = column(allocations, "time", rows);
  const json& bytes = column(allocations, "weight", rows);
  const bool balanced = allocations.contains("memoryAddress");
  const json* addresses = balanced ? &column(allocations, "memoryAddress", rows) : nullptr;
  std::vector<ThreadAllocation>& rows_out = out_.allocations.emplace_back();
  for (size_t i = 0; i < rows; ++i) {
    const std::optional<uint32_t> stack =
        index_at(stacks, i, stack_of_->size(), "allocation stack");
    const double weight = number_at(bytes, i, 0);
    const auto magnitude = static_cast<int64_t>(clamped(std::fabs(weight), 0x1p62));
    rows_out.push_back({MonotonicNs{clamped(number_at(times, i, 0) * 1e6, 0x1p63)},
                        stack.value_or(UINT32_MAX), weight < 0 ? -magnitude : magnitude,
                        addresses ? clamped(number_at(*addresses, i, 0), 0x1p63) : 0});
  }
  out.allocations = AllocationsTable(rows_out, stack_of_, MonotonicNs{0});
  out_.settings.memory = out_.settings.memory || rows > 0;
  out_.settings.held = out_.settings.held || (balanced && rows > 0);
}

// record --memory's address-space markers (the others are not converted).
void TableReader::read_address_space_markers(const json& markers, ThreadTables& out) {
  const json& data = column(markers, "data");
  const json& times = column(markers, "startTime", data.size());
  for (size_t i = 0; i < data.size(); ++i) {
    const json& d = data[i];
    if (!d.is_object() || string_member(d, "type") != MarkersTable::kAddressSpaceType) continue;
    MarkersTable::AddressSpaceChange change{string_member(d, "call"), signed_bytes(d, "change"),
                                            signed_bytes(d, "sampledBytes"), 0, std::nullopt};
    if (const auto cause = d.find("cause"); cause != d.end() && cause->is_object()) {
      const json stack = json::array({member(*cause, "stack")});
      if (const std::optional<uint32_t> at = index_at(stack, 0, stack_of_->size(), "marker stack"))
        change.cause = (*stack_of_)[*at];
    }
    const StringIndex name = out_.profile.shared.strings.intern(change.call);
    out.markers.add({name, number_at(times, i, 0), std::move(change)});
    out_.settings.address_space = true;
  }
}

void read_settings(const json& meta, ReadProfile& out) {
  PprofSettings& s = out.settings;
  s.interval_ms = number_or(meta, "interval", 0);
  if (s.interval_ms <= 0) malformed("meta.interval is not a positive number");
  s.start_wall_clock_ms = number_or(meta, "startTime", 0);
  s.duration_ms = number_or(meta, "profilingEndTime", 0);
  s.comment = "bpfprof convert";
  for (size_t i = 0; i < out.profile.shared.frames.size(); ++i) {
    const Category c = out.profile.shared.frames[FrameIndex{static_cast<uint32_t>(i)}].category;
    if (c == Category::kIdle || c == Category::kWaitingForCpu) s.off_cpu = true;
  }
}

// The profile from its parsed JSON.
std::unique_ptr<ReadProfile> profile_from_json(const json& root) {
  auto out = std::make_unique<ReadProfile>();
  try {
    const json& threads = member(root, "threads");
    if (!threads.is_array()) malformed("threads is not an array");
    // The threads' tables point into these vectors.
    out->samples.reserve(threads.size());
    out->allocations.reserve(threads.size());
    TableReader reader(root, *out);
    reader.read_libs(member(root, "libs"));
    reader.read_shared();
    for (const json& thread : threads) reader.read_thread(thread);
    read_settings(member(root, "meta"), *out);
  } catch (const json::exception& e) {
    malformed(e.what());
  }
  return out;
}

}  // namespace

std::unique_ptr<ReadProfile> parse_processed_profile(const std::string& text) {
  json root = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded()) throw std::runtime_error("not JSON");
  return profile_from_json(root);
}

std::unique_ptr<ReadProfile> read_processed_profile(const std::string& path) {
  gzFile file = gzopen(path.c_str(), "rb");  // reads plain files as they are
  if (!file) throw std::runtime_error("cannot open " + path + ": " + strerror(errno));
  GzStreamBuf buffer(file);
  std::istream in(&buffer);
  json root = json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (std::optional<std::string> error = buffer.error())
    throw std::runtime_error("cannot read " + path + ": " + *error);
  if (root.is_discarded()) throw std::runtime_error(path + ": not JSON");
  try {
    return profile_from_json(root);
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(path + ": " + e.what());
  }
}

}  // namespace bpfprof
