#include "userspace/output/pprof_writer.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>
#include <unordered_map>

#include "profile.pb.h"
#include "userspace/model/label_set.h"
#include "userspace/output/json_writer.h"

namespace bpfprof {

namespace {

namespace pb = perftools::profiles;

constexpr uint64_t kPageSize = 4096;
constexpr uint32_t kEmptyStack = UINT32_MAX;

// pprof's string table; index 0 is "". Protobuf strings must be valid UTF-8 (thread names
// are bytes).
class PprofStrings {
 public:
  explicit PprofStrings(pb::Profile& out) : out_(out) { intern(""); }
  int64_t intern(const std::string& s) {
    auto [it, inserted] = index_.try_emplace(s, static_cast<int64_t>(index_.size()));
    if (inserted) out_.add_string_table(to_valid_utf8(s));
    return it->second;
  }

 private:
  pb::Profile& out_;
  std::unordered_map<std::string, int64_t> index_;
};

struct SampleValues {
  int64_t count = 0;         // timer samples
  int64_t cpu_ns = 0;        // the kernel's CPU time
  int64_t off_cpu_ns = 0;    // waiting
  int64_t alloc_bytes = 0;   // memory first touched, or allocated
  int64_t held_bytes = 0;    // allocated, not freed by the end
  int64_t mapped_bytes = 0;  // the address space grown (sampled mmap, brk, mremap)
};

// What a mapping says about the code found in it.
struct MappingUse {
  uint64_t mapping_id = 0;
  uint64_t max_address = 0;   // the highest library-relative address
  uint64_t memory_start = 0;  // where add_mappings() laid the library out
  bool has_filenames = false;
  bool has_line_numbers = false;
  bool has_inline_frames = false;
};

class PprofBuilder {
 public:
  PprofBuilder(const BuiltProfile& profile, const PprofSettings& settings)
      : profile_(profile), t_(profile.shared), settings_(settings), strings_(out_) {}

  pb::Profile build();

 private:
  void add_header();
  void add_thread_samples(const ThreadTables& thread, const std::vector<bool>& held);
  void add_sample(const ThreadTables& thread, std::optional<StackIndex> stack,
                  const SampleValues& values);
  std::optional<std::string> off_cpu_state(std::optional<StackIndex> stack) const;
  uint64_t location_of_leaf(StackIndex stack, std::optional<StackIndex>& caller);
  uint64_t add_location(const std::vector<FrameIndex>& innermost_first);
  uint64_t function_of(const FrameTable::Frame& frame);
  void add_mappings();
  const std::string& text(StringIndex i) const { return t_.strings.strings()[i.value]; }

  const BuiltProfile& profile_;
  const SharedTables& t_;
  const PprofSettings settings_;
  pb::Profile out_;
  PprofStrings strings_;
  // The location at the leaf of each stack, and the stack above that location's frames.
  struct LeafLocation {
    uint64_t location;
    std::optional<StackIndex> caller;
  };
  std::unordered_map<uint32_t, LeafLocation> leaf_locations_;
  std::map<std::vector<uint32_t>, uint64_t> location_ids_;         // by frames, innermost first
  std::map<std::pair<uint32_t, int64_t>, uint64_t> function_ids_;  // by func, system name
  std::map<uint32_t, MappingUse> mappings_;                        // by LibIndex
  std::vector<std::optional<LibIndex>> lib_of_location_;           // by location id - 1
};

pb::Profile PprofBuilder::build() {
  add_header();
  std::vector<ProcessRows> lists;
  for (const ThreadTables& thread : profile_.threads)
    if (thread.allocations.rows()) lists.emplace_back(thread.pid, thread.allocations.rows());
  const std::vector<std::vector<bool>> held = blocks_held(lists);
  size_t with_rows = 0;
  for (const ThreadTables& thread : profile_.threads)
    add_thread_samples(thread, thread.allocations.rows() ? held[with_rows++] : std::vector<bool>{});
  add_mappings();
  return std::move(out_);
}

void PprofBuilder::add_header() {
  auto value_type = [&](pb::ValueType* v, const char* type, const char* unit) {
    v->set_type(strings_.intern(type));
    v->set_unit(strings_.intern(unit));
  };
  value_type(out_.add_sample_type(), "samples", "count");
  value_type(out_.add_sample_type(), "cpu", "nanoseconds");
  if (settings_.off_cpu) value_type(out_.add_sample_type(), "off-cpu", "nanoseconds");
  if (settings_.memory) value_type(out_.add_sample_type(), "alloc_space", "bytes");
  if (settings_.held) value_type(out_.add_sample_type(), "inuse_space", "bytes");
  if (settings_.address_space) value_type(out_.add_sample_type(), "mapped_space", "bytes");
  out_.set_default_sample_type(strings_.intern("cpu"));
  value_type(out_.mutable_period_type(), "cpu", "nanoseconds");
  out_.set_period(std::llround(settings_.interval_ms * 1e6));
  out_.set_time_nanos(std::llround(settings_.start_wall_clock_ms * 1e6));
  out_.set_duration_nanos(std::llround(settings_.duration_ms * 1e6));
  if (!settings_.comment.empty()) out_.add_comment(strings_.intern(settings_.comment));
}

// A thread's samples summed by stack: pprof has no time axis.
void PprofBuilder::add_thread_samples(const ThreadTables& thread, const std::vector<bool>& held) {
  std::map<uint32_t, SampleValues> by_stack;
  const double interval_ns = settings_.interval_ms * 1e6;
  for (size_t i = 0; i < thread.samples.size(); ++i) {
    const SamplesTable::Sample s = thread.samples.row(i);
    SampleValues& v = by_stack[s.stack ? s.stack->value : kEmptyStack];
    v.cpu_ns += static_cast<int64_t>(s.cpu_delta_ns);
    if (settings_.off_cpu && off_cpu_state(s.stack))
      v.off_cpu_ns += std::llround(s.weight * interval_ns);
    else
      v.count += std::llround(s.weight);
  }
  for (size_t i = 0; i < thread.allocations.size(); ++i) {
    const AllocationsTable::Allocation a = thread.allocations.row(i);
    if (a.bytes <= 0) continue;  // a free: a block's end, not memory
    SampleValues& v = by_stack[a.stack ? a.stack->value : kEmptyStack];
    v.alloc_bytes += a.bytes;
    if (i < held.size() && held[i]) v.held_bytes += a.bytes;
  }
  for (const MarkersTable::Marker& m : thread.markers.markers()) {
    const auto* change = std::get_if<MarkersTable::AddressSpaceChange>(&m.data);
    if (!change || change->sampled_bytes <= 0) continue;
    by_stack[change->cause ? change->cause->value : kEmptyStack].mapped_bytes +=
        change->sampled_bytes;
  }
  for (const auto& [stack, values] : by_stack) {
    if (values.count == 0 && values.cpu_ns == 0 && values.off_cpu_ns == 0 &&
        values.alloc_bytes == 0 && values.mapped_bytes == 0)
      continue;
    add_sample(thread, stack == kEmptyStack ? std::nullopt : std::optional(StackIndex{stack}),
               values);
  }
}

void PprofBuilder::add_sample(const ThreadTables& thread, std::optional<StackIndex> stack,
                              const SampleValues& values) {
  pb::Sample* sample = out_.add_sample();
  std::optional<LabelSet> labels;
  for (std::optional<StackIndex> at = stack; at;) {
    // A label set's frame, at the root: the sample's labels (go tool pprof -tags, -tagfocus).
    const FrameTable::Frame& frame = t_.frames[t_.stacks.frame(*at)];
    if (frame.is_label_set()) {
      labels = parse_label_frame_name(text(t_.funcs[frame.func].name));
      at = t_.stacks.prefix(*at);
      continue;
    }
    std::optional<StackIndex> caller;
    sample->add_location_id(location_of_leaf(*at, caller));
    at = caller;
  }
  sample->add_value(values.count);
  sample->add_value(values.cpu_ns);
  if (settings_.off_cpu) sample->add_value(values.off_cpu_ns);
  if (settings_.memory) sample->add_value(values.alloc_bytes);
  if (settings_.held) sample->add_value(values.held_bytes);
  if (settings_.address_space) sample->add_value(values.mapped_bytes);
  auto number = [&](const char* key, int64_t value) {
    pb::Label* label = sample->add_label();
    label->set_key(strings_.intern(key));
    label->set_num(value);
  };
  auto text_label = [&](const char* key, const std::string& value) {
    pb::Label* label = sample->add_label();
    label->set_key(strings_.intern(key));
    label->set_str(strings_.intern(value));
  };
  number("pid", thread.pid.value);
  number("tid", thread.tid.value);
  text_label("process_name", thread.process_name);
  text_label("thread_name", thread.name);
  const ProcessContext& context = thread.context;
  if (context.runtime) {
    text_label("container_runtime", container_runtime_name(*context.runtime));
    text_label("container_id", context.container_id);
  }
  if (!context.pod_uid.empty()) text_label("pod_uid", context.pod_uid);
  if (context.qos) text_label("pod_qos", pod_qos_name(*context.qos));
  if (!context.service.empty()) text_label("service", context.service);
  if (context.namespace_pid) number("namespace_pid", *context.namespace_pid);
  if (std::optional<std::string> state = off_cpu_state(stack)) text_label("off_cpu_state", *state);
  if (labels)
    for (const auto& [key, value] : *labels) text_label(key.c_str(), value);
}

// A wait ends in its state's pseudo-frame ("[sleeping]"), the only frames of these categories.
std::optional<std::string> PprofBuilder::off_cpu_state(std::optional<StackIndex> stack) const {
  if (!stack) return std::nullopt;
  const FrameTable::Frame& leaf = t_.frames[t_.stacks.frame(*stack)];
  if (leaf.category != Category::kIdle && leaf.category != Category::kWaitingForCpu)
    return std::nullopt;
  std::string name = text(t_.funcs[leaf.func].name);
  if (name.size() > 2 && name.front() == '[' && name.back() == ']')
    name = name.substr(1, name.size() - 2);
  return name;
}

// The frames of one address are consecutive in a stack, the innermost inlined function
// (deepest inline depth) nearest the leaf; they become one location.
uint64_t PprofBuilder::location_of_leaf(StackIndex stack, std::optional<StackIndex>& caller) {
  if (auto it = leaf_locations_.find(stack.value); it != leaf_locations_.end()) {
    caller = it->second.caller;
    return it->second.location;
  }
  std::vector<FrameIndex> frames{t_.stacks.frame(stack)};
  caller = t_.stacks.prefix(stack);
  for (;;) {
    const FrameTable::Frame& inner = t_.frames[frames.back()];
    if (inner.inline_depth == 0 || !caller || !inner.address) break;
    const FrameTable::Frame& outer = t_.frames[t_.stacks.frame(*caller)];
    if (outer.inline_depth + 1 != inner.inline_depth || outer.lib != inner.lib ||
        outer.address != inner.address)
      break;
    frames.push_back(t_.stacks.frame(*caller));
    caller = t_.stacks.prefix(*caller);
  }
  const uint64_t location = add_location(frames);
  leaf_locations_.emplace(stack.value, LeafLocation{location, caller});
  return location;
}

uint64_t PprofBuilder::add_location(const std::vector<FrameIndex>& innermost_first) {
  std::vector<uint32_t> key;
  for (FrameIndex f : innermost_first) key.push_back(f.value);
  auto [it, inserted] = location_ids_.try_emplace(key, location_ids_.size() + 1);
  if (!inserted) return it->second;
  pb::Location* location = out_.add_location();
  location->set_id(it->second);
  const FrameTable::Frame& first = t_.frames[innermost_first.front()];
  const bool has_address = first.address && first.lib;
  lib_of_location_.push_back(has_address ? first.lib : std::nullopt);
  MappingUse* use = has_address ? &mappings_[first.lib->value] : nullptr;
  if (use) {
    location->set_address(*first.address);  // relative; add_mappings() adds memory_start
    use->max_address = std::max<uint64_t>(use->max_address, *first.address);
    use->has_inline_frames |= innermost_first.size() > 1;
  }
  for (FrameIndex f : innermost_first) {
    const FrameTable::Frame& frame = t_.frames[f];
    pb::Line* line = location->add_line();
    line->set_function_id(function_of(frame));
    if (frame.line) line->set_line(*frame.line);
    if (!use) continue;
    use->has_filenames |= t_.funcs[frame.func].source.has_value();
    use->has_line_numbers |= frame.line.has_value();
  }
  return it->second;
}

// The name the system knows an outermost frame's code by is its ELF symbol's; an inlined
// function has only its own name.
uint64_t PprofBuilder::function_of(const FrameTable::Frame& frame) {
  const FuncTable::Func& func = t_.funcs[frame.func];
  const int64_t name = strings_.intern(text(func.name));
  int64_t system_name = name;
  if (frame.native_symbol && frame.inline_depth == 0)
    system_name = strings_.intern(text(t_.native_symbols[*frame.native_symbol].name));
  auto [it, inserted] =
      function_ids_.try_emplace({frame.func.value, system_name}, function_ids_.size() + 1);
  if (!inserted) return it->second;
  pb::Function* function = out_.add_function();
  function->set_id(it->second);
  function->set_name(name);
  function->set_system_name(system_name);
  if (func.source) function->set_filename(strings_.intern(text(t_.sources.filename(*func.source))));
  if (func.line_number) function->set_start_line(*func.line_number);
  return it->second;
}

// One mapping per library with code in the samples, laid out one after another (each at a
// page boundary) so that every location's address lies in its mapping's range. pprof takes
// the first mapping for the main binary: the executable of the first thread's process.
void PprofBuilder::add_mappings() {
  std::vector<uint32_t> order;
  for (const auto& [lib, use] : mappings_) order.push_back(lib);
  if (!profile_.threads.empty())
    std::stable_partition(order.begin(), order.end(), [&](uint32_t lib) {
      return profile_.libs[LibIndex{lib}].name == profile_.threads.front().process_name;
    });
  uint64_t next_start = kPageSize;
  for (uint32_t lib : order) {
    MappingUse& use = mappings_.at(lib);
    const LibraryDescription& d = profile_.libs[LibIndex{lib}];
    pb::Mapping* mapping = out_.add_mapping();
    use.mapping_id = static_cast<uint64_t>(out_.mapping_size());
    mapping->set_id(use.mapping_id);
    use.memory_start = next_start;
    mapping->set_memory_start(next_start);
    const uint64_t size = (use.max_address / kPageSize + 1) * kPageSize;
    mapping->set_memory_limit(next_start + size);
    mapping->set_file_offset(0);
    mapping->set_filename(strings_.intern(d.path.empty() ? d.name : d.path));
    if (!d.code_id.empty()) mapping->set_build_id(strings_.intern(d.code_id));
    mapping->set_has_functions(true);
    mapping->set_has_filenames(use.has_filenames);
    mapping->set_has_line_numbers(use.has_line_numbers);
    mapping->set_has_inline_frames(use.has_inline_frames);
    next_start += size + kPageSize;
  }
  for (int i = 0; i < out_.location_size(); ++i) {
    const std::optional<LibIndex> lib = lib_of_location_[static_cast<size_t>(i)];
    if (!lib) continue;
    const MappingUse& use = mappings_.at(lib->value);
    pb::Location* location = out_.mutable_location(i);
    location->set_mapping_id(use.mapping_id);
    location->set_address(location->address() + use.memory_start);
  }
}

}  // namespace

void write_pprof(const BuiltProfile& profile, const PprofSettings& settings, OutputSink& sink) {
  const pb::Profile message = PprofBuilder(profile, settings).build();
  std::string bytes;
  if (!message.SerializeToString(&bytes)) throw std::runtime_error("cannot serialize the profile");
  sink.write(bytes);
}

}  // namespace bpfprof
