#include "userspace/output/profile_writer.h"
#include "userspace/model/unwind_report.h"

#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

#include "symbols/symbolizer.h"
#include "userspace/output/json_writer.h"
#include "userspace/output/string_table.h"

namespace bpfprof {

namespace {

enum Category : int {
  kCategoryOther = 0,
  kCategoryUser = 1,
  kCategoryKernel = 2,
  kCategoryIdle = 3,  // named "Idle": the front end's "include idle" switch hides these
  kCategoryWaitingForCpu = 4,
};

struct CategoryInfo {
  const char* name;
  const char* color;
};
constexpr CategoryInfo kCategories[] = {
    {"Other", "grey"},
    {"User", "yellow"},
    {"Kernel", "orange"},
    {"Idle", "transparent"},
    {"Waiting for CPU", "lightblue"},
};

struct StateFrame {
  const char* name;
  Category category;
};
StateFrame state_frame(uint64_t state) {
  switch (static_cast<OffCpuState>(state)) {
    case OffCpuState::kIoWait:
      return {"[I/O wait]", kCategoryIdle};
    case OffCpuState::kWaitingForCpu:
      return {"[waiting for CPU]", kCategoryWaitingForCpu};
    default:
      return {"[sleeping]", kCategoryIdle};
  }
}

// The front end stores frame and symbol addresses in 32-bit columns.
constexpr uint64_t kMaxRelativeAddress = 0xFFFFFFFFull;

std::string hex_address(uint64_t value) {
  char buf[32];
  snprintf(buf, sizeof(buf), "0x%llx", static_cast<unsigned long long>(value));
  return buf;
}

std::string cpu_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      size_t colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
    }
  }
  return {};
}

double ms_since(MonotonicNs start, MonotonicNs t) {
  return (static_cast<double>(t.value) - static_cast<double>(start.value)) / 1e6;
}

// The shared tables, built in the front end's struct-of-arrays shape.
struct SharedTables {
  StringTable strings;

  std::vector<LibraryDescription> libs;
  std::unordered_map<int32_t, int32_t> lib_index;  // LibId -> index into libs

  // resourceTable: one resource per lib.
  std::vector<StringIndex> resource_name;

  struct Func {
    StringIndex name;
    int32_t resource;
    int32_t source;  // index into sources, -1 → null
  };
  std::vector<Func> funcs;
  std::map<std::tuple<int32_t, std::string, int32_t>, int32_t>
      func_index;  // (resource, name, source)

  std::vector<StringIndex> source_filenames;  // the sources table
  std::unordered_map<std::string, int32_t> source_index;

  struct NativeSymbol {
    int32_t lib;
    uint64_t address;
    StringIndex name;
    uint64_t size;
  };
  std::vector<NativeSymbol> native_symbols;
  std::map<std::pair<int32_t, uint64_t>, int32_t> native_symbol_index;

  struct Frame {
    int64_t address;  // -1 when unknown
    int32_t lib;      // -1 when none
    int32_t category;
    int32_t func;
    int32_t native_symbol;  // -1 → null
    int32_t inline_depth = 0;
    int64_t line = -1;  // -1 → null
  };
  std::vector<Frame> frames;
  // The frames one address becomes, outermost first (several where functions were inlined).
  std::unordered_map<FrameKey, std::vector<int32_t>, FrameKeyHash> frame_index;

  int32_t source_for(const std::optional<std::string>& filename) {
    if (!filename) return -1;
    auto [it, inserted] =
        source_index.try_emplace(*filename, static_cast<int32_t>(source_filenames.size()));
    if (inserted) source_filenames.push_back(strings.intern(*filename));
    return it->second;
  }
  int32_t func_for(int32_t resource, const std::string& name, int32_t source = -1) {
    auto [it, inserted] =
        func_index.try_emplace({resource, name, source}, static_cast<int32_t>(funcs.size()));
    if (inserted) funcs.push_back(Func{strings.intern(name), resource, source});
    return it->second;
  }
  int32_t native_symbol_for(int32_t lib, uint64_t address, const std::string& name, uint64_t size) {
    auto [it, inserted] = native_symbol_index.try_emplace(
        {lib, address}, static_cast<int32_t>(native_symbols.size()));
    if (inserted) native_symbols.push_back(NativeSymbol{lib, address, strings.intern(name), size});
    return it->second;
  }
};

class ProfileBuilder {
 public:
  ProfileBuilder(const SessionModel& model, const Recording& recording,
                 const ProfileOptions& options)
      : model_(model),
        recording_(recording),
        options_(options),
        symbolizer_(SymbolizerOptions{options.symbol_dirs}) {}

  // Maps every stack of the model to a stack of output frames: a model frame becomes one
  // output frame per function inlined at its address.
  void build_stacks() {
    const auto& nodes = model_.stacks().nodes();
    // An [anon] library has no file: its addresses are made relative to the lowest one seen,
    // so they fit the front end's 32-bit address column (a JIT's code lies close together).
    for (const auto& node : nodes) {
      if (node.key.lib.value < 0 || !model_.library(node.key.lib).anonymous_memory_of) continue;
      auto [it, inserted] = anonymous_base_.try_emplace(node.key.lib.value, node.key.address);
      if (!inserted) it->second = std::min(it->second, node.key.address);
    }
    output_stack_of_.reserve(nodes.size());
    root_of_.reserve(nodes.size());
    for (const auto& node : nodes) {
      if (node.parent == ResolvedStackTree::kRoot) {
        // The outermost frame: a user stack that does not begin at a thread root was cut
        // short (stack copy too small, no CFI, a frame-pointer walk gone astray) and says so.
        root_of_.push_back(classify_outermost(node.key));
        OutputStackTree::NodeId out = OutputStackTree::kRoot;
        if (root_of_.back() == StackRoot::kTruncated)
          out = output_stacks_.intern(out, truncated_frame());
        for (int32_t frame : frames_for(node.key)) out = output_stacks_.intern(out, frame);
        output_stack_of_.push_back(out);
        continue;
      }
      root_of_.push_back(root_of_[node.parent]);
      StackId prefix = node.parent;
      // An off-CPU stack is taken from inside our sched_switch program: the tracing frames
      // between __schedule and the state frame are the profiler's, not the thread's.
      if (node.key.lib == kOffCpuStateFrame)
        while (prefix != ResolvedStackTree::kRoot && is_tracing_frame(nodes[prefix].key))
          prefix = nodes[prefix].parent;
      OutputStackTree::NodeId out =
          prefix == ResolvedStackTree::kRoot ? OutputStackTree::kRoot : output_stack_of_[prefix];
      for (int32_t frame : frames_for(node.key)) out = output_stacks_.intern(out, frame);
      output_stack_of_.push_back(out);
    }
  }

  ProfileSummary write(OutputSink& sink);
  ProfileSummary write_collapsed(OutputSink& sink);

 private:
  // How a stack begins, decided by its outermost frame.
  enum class StackRoot : uint8_t { kNoUserFrames, kThreadRoot, kTruncated };
  std::vector<StackRoot> root_of_;  // per model stack node

  StackRoot classify_outermost(const FrameKey& key) {
    if (key.lib == kKernelLib || key.lib == kOffCpuStateFrame) return StackRoot::kNoUserFrames;
    if (key.lib == kNoLib) return StackRoot::kTruncated;
    const Library& library = model_.library(key.lib);
    if (library.anonymous_memory_of) return StackRoot::kTruncated;  // JIT code starts no thread
    if (symbolizer_.is_thread_root(library.readable_path(), key.address))
      return StackRoot::kThreadRoot;
    // glibc's start-up functions under main and a thread's function: all the program's own
    // frames are there (a frame-pointer walk ends here, as libc has no frame pointers).
    const std::string& name = function_name(frames_for(key).front());
    return name == "__libc_start_call_main" || name == "__libc_start_main" ||
                   name == "__libc_start_main_impl" || name == "start_thread"
               ? StackRoot::kThreadRoot
               : StackRoot::kTruncated;
  }
  const std::string& function_name(int32_t frame) const {
    return tables_.strings
        .strings()[tables_.funcs[tables_.frames[static_cast<size_t>(frame)].func].name.value];
  }
  int32_t truncated_frame() { return frames_for(FrameKey{kTruncatedStackFrame, 0}).front(); }
  void measure_completeness(const std::vector<const Thread*>& threads,
                            ProfileSummary& summary) const;
  StackCompleteness user_stacks_;
  std::vector<std::pair<std::string, StackCompleteness>> incomplete_by_process_;

  int32_t output_lib(LibId id) {
    auto it = tables_.lib_index.find(id.value);
    if (it != tables_.lib_index.end()) return it->second;
    const Library& lib = model_.library(id);
    LibraryDescription d;
    if (id == kKernelLib) {
      d = symbolizer_.describe_kernel();
    } else if (lib.anonymous_memory_of) {
      d.name = d.path = d.debug_name = d.debug_path = "[anon]";
    } else {
      d = symbolizer_.describe_library(lib.path, lib.readable_path(), lib.build_id);
    }
    int32_t index = static_cast<int32_t>(tables_.libs.size());
    tables_.resource_name.push_back(tables_.strings.intern(d.name));
    tables_.libs.push_back(std::move(d));
    tables_.lib_index.emplace(id.value, index);
    return index;
  }

  // A kernel module is its own library, named like perf does: "[module]".
  int32_t module_lib(const std::string& module) {
    auto [it, inserted] =
        module_lib_index_.try_emplace(module, static_cast<int32_t>(tables_.libs.size()));
    if (inserted) {
      LibraryDescription d;
      d.name = d.path = d.debug_name = d.debug_path = "[" + module + "]";
      tables_.resource_name.push_back(tables_.strings.intern(d.name));
      tables_.libs.push_back(std::move(d));
    }
    return it->second;
  }

  bool is_tracing_frame(const FrameKey& key) {
    if (key.lib != kKernelLib) return false;
    const std::string& name = function_name(frames_for(key).back());
    return name.starts_with("bpf_prog_") || name.starts_with("bpf_trace_run") ||
           name.starts_with("__bpf_trace_") || name.starts_with("__traceiter_") ||
           name.starts_with("bpf_trampoline_");
  }

  int32_t add_frame(const SharedTables::Frame& frame) {
    tables_.frames.push_back(frame);
    return static_cast<int32_t>(tables_.frames.size() - 1);
  }

  const std::vector<int32_t>& frames_for(const FrameKey& key) {
    auto it = tables_.frame_index.find(key);
    if (it != tables_.frame_index.end()) return it->second;
    std::vector<int32_t> frames;

    if (key.lib == kOffCpuStateFrame) {
      StateFrame state = state_frame(key.address);
      frames.push_back(add_frame({-1, -1, state.category, tables_.func_for(-1, state.name), -1}));
    } else if (key.lib == kTruncatedStackFrame) {
      frames.push_back(
          add_frame({-1, -1, kCategoryOther, tables_.func_for(-1, "[truncated]"), -1}));
    } else if (key.lib == kNoLib) {
      frames.push_back(
          add_frame({-1, -1, kCategoryUser, tables_.func_for(-1, hex_address(key.address)), -1}));
      unnamed_frames_.insert(frames.back());
    } else {
      const bool kernel = key.lib == kKernelLib;
      const int32_t library_lib = output_lib(key.lib);
      const Library& library = model_.library(key.lib);
      std::vector<SymbolizedFrame> symbolized =
          kernel ? symbolizer_.symbolize_kernel(key.address)
          : library.anonymous_memory_of
              ? symbolizer_.symbolize_jit(library.anonymous_memory_of->value, key.address)
              : symbolizer_.symbolize_in_file(library.readable_path(), key.address);
      if (library.anonymous_memory_of) {
        const uint64_t base = anonymous_base_.at(key.lib.value);
        for (SymbolizedFrame& f : symbolized) {
          f.relative_address -= base;
          if (f.symbol)
            f.symbol->relative_address =
                f.symbol->relative_address >= base ? f.symbol->relative_address - base : 0;
        }
      }
      for (const SymbolizedFrame& s : symbolized) {
        const int32_t lib = s.kernel_module.empty() ? library_lib : module_lib(s.kernel_module);
        SharedTables::Frame frame{-1, -1, kernel ? kCategoryKernel : kCategoryUser, -1, -1};
        if (s.relative_address <= kMaxRelativeAddress) {
          frame.address = static_cast<int64_t>(s.relative_address);
          frame.lib = lib;
        }
        std::string name = !s.name.empty() ? s.name
                           : kernel || library.anonymous_memory_of
                               ? hex_address(key.address)
                               : tables_.libs[lib].name + "+" + hex_address(s.relative_address);
        frame.func = tables_.func_for(lib, name, tables_.source_for(s.file));
        if (s.symbol && frame.lib >= 0 && s.symbol->relative_address <= kMaxRelativeAddress)
          frame.native_symbol = tables_.native_symbol_for(lib, s.symbol->relative_address,
                                                          s.symbol->name, s.symbol->size);
        frame.inline_depth = static_cast<int32_t>(s.inline_depth);
        if (s.line) frame.line = *s.line;
        frames.push_back(add_frame(frame));
        if (s.name.empty() || s.named_by_address) unnamed_frames_.insert(frames.back());
      }
    }
    return tables_.frame_index.emplace(key, std::move(frames)).first->second;
  }

  void write_meta(JsonWriter& w, size_t thread_count);
  void write_libs(JsonWriter& w);
  void write_shared(JsonWriter& w);
  void write_thread(JsonWriter& w, const Thread& thread);
  // The profile's pid string of each process entry: the pid itself, except that earlier
  // entries of a pid that has several (exec, reuse) get "PID.1", "PID.2", ... so that the
  // front end, which groups threads by pid, keeps them apart.
  void assign_pid_strings(const std::vector<const Thread*>& threads);
  std::unordered_map<uint32_t, std::string> pid_string_;

  const SessionModel& model_;
  const Recording& recording_;
  const ProfileOptions& options_;
  Symbolizer symbolizer_;
  SharedTables tables_;
  std::unordered_map<int32_t, uint64_t> anonymous_base_;
  std::unordered_map<std::string, int32_t> module_lib_index_;  // [anon] LibId -> its base address
  using OutputStackTree = PrefixTree<int32_t>;  // of frame indices: the profile's stackTable
  std::vector<std::pair<std::string, double>> top_self_functions(
      const std::vector<const Thread*>& threads, size_t count) const;
  std::string describe_by_process(const std::unordered_map<Pid, uint64_t>& counts) const;
  std::vector<const Thread*> threads_to_write(ProfileSummary& summary) const;
  // Frames named only by their address (no symbol found), and the share of on-CPU sample
  // weight whose leaf is such a frame, by library: where symbolization failed.
  std::unordered_set<int32_t> unnamed_frames_;
  std::vector<std::pair<std::string, double>> unnamed_share_by_library_;
  void measure_unnamed(const std::vector<const Thread*>& threads);
  std::vector<std::string> unnamed_library_paths() const;
  void write_loss_marker_schema(JsonWriter& w);
  void write_markers(JsonWriter& w, const Thread& thread);
  void assign_losses(const std::vector<const Thread*>& threads);
  static constexpr const char* kLossMarkerType = "bpfprof-lost";
  std::unordered_map<const Thread*, std::vector<const LossRecord*>> losses_by_thread_;

  OutputStackTree output_stacks_;
  std::vector<OutputStackTree::NodeId> output_stack_of_;  // model stack -> output stack
};

template <typename T, typename F>
void write_column(JsonWriter& w, std::string_view name, const std::vector<T>& rows, F value) {
  w.key(name);
  w.begin_array();
  for (const T& row : rows) value(row);
  w.end_array();
}

// An empty struct-of-arrays table: each column an empty array, length 0.
void write_empty_table(JsonWriter& w, std::string_view name,
                       std::initializer_list<const char*> columns) {
  w.key(name);
  w.begin_object();
  for (const char* column : columns) {
    w.key(column);
    w.begin_array();
    w.end_array();
  }
  w.key("length");
  w.number(int64_t{0});
  w.end_object();
}

void ProfileBuilder::write_meta(JsonWriter& w, size_t thread_count) {
  utsname u{};
  uname(&u);
  w.key("meta");
  w.begin_object();
  w.key("interval");
  w.number(1000.0 / recording_.frequency_hz);
  w.key("startTime");
  w.number(recording_.start_wall_clock_ms);
  w.key("profilingStartTime");
  w.number(0.0);
  w.key("profilingEndTime");
  w.number(ms_since(recording_.start_time, recording_.end_time));
  w.key("processType");
  w.number(int64_t{0});
  w.key("product");
  w.string("bpfprof");
  w.key("stackwalk");
  w.number(int64_t{1});
  w.key("version");
  w.number(int64_t{kGeckoProfileVersion});
  w.key("preprocessedProfileVersion");
  w.number(int64_t{kProcessedProfileVersion});
  w.key("symbolicated");
  w.boolean(true);
  w.key("platform");
  w.string("Linux");
  w.key("oscpu");
  w.string(std::string("Linux ") + u.release + " " + u.machine);
  w.key("abi");
  w.string(u.machine);
  w.key("CPUName");
  w.string(cpu_name());
  w.key("logicalCPUs");
  w.number(static_cast<int64_t>(sysconf(_SC_NPROCESSORS_ONLN)));
  w.key("physicalCPUs");
  w.number(static_cast<int64_t>(sysconf(_SC_NPROCESSORS_ONLN)));
  w.key("sampleUnits");
  w.begin_object();
  w.key("time");
  w.string("ms");
  w.key("eventDelay");
  w.string("ms");
  w.key("threadCPUDelta");
  w.string("ns");
  w.end_object();
  w.key("categories");
  w.begin_array();
  for (const CategoryInfo& category : kCategories) {
    w.begin_object();
    w.key("name");
    w.string(category.name);
    w.key("color");
    w.string(category.color);
    w.key("subcategories");
    w.begin_array();
    w.string("Other");
    w.end_array();
    w.end_object();
  }
  w.end_array();
  w.key("markerSchema");
  w.begin_array();
  write_loss_marker_schema(w);
  w.end_array();
  write_empty_table(w, "extensions", {"id", "name", "baseURL"});
  w.key("configuration");
  w.begin_object();
  w.key("threads");
  w.begin_array();
  w.end_array();
  w.key("features");
  w.begin_array();
  w.string(recording_.sampling_event);
  w.end_array();
  w.key("capacity");
  w.number(int64_t{0});
  w.end_object();
  w.key("extra");
  w.begin_array();
  w.begin_object();
  w.key("label");
  w.string("bpfprof");
  w.key("entries");
  w.begin_array();
  auto entry = [&](const char* label, const char* format, auto value) {
    w.begin_object();
    w.key("label");
    w.string(label);
    w.key("format");
    w.string(format);
    w.key("value");
    w.value(value);
    w.end_object();
  };
  entry("Call graph", "string", recording_.call_graph);
  entry("Sampling event", "string", recording_.sampling_event);
  entry("Samples", "integer", recording_.stats.samples);
  entry("Lost events", "integer",
        recording_.stats.lost_bpf_events + recording_.stats.lost_sideband_records);
  if (user_stacks_.total > 0) entry("User stacks complete", "percentage", user_stacks_.share());
  for (const auto& [label, value] : stack_source_report(recording_))
    entry(label.c_str(), "string", value);
  if (recording_.stats.lost_bpf_events) {
    std::string per_cpu;
    for (size_t cpu = 0; cpu < recording_.stats.lost_bpf_events_per_cpu.size(); ++cpu) {
      if (!recording_.stats.lost_bpf_events_per_cpu[cpu]) continue;
      per_cpu += (per_cpu.empty() ? "" : ", ") + ("CPU " + std::to_string(cpu)) + ": " +
                 std::to_string(recording_.stats.lost_bpf_events_per_cpu[cpu]);
    }
    entry("Lost events per CPU", "string", per_cpu);
    std::unordered_map<Pid, uint64_t> by_process;
    for (const LossRecord& loss : recording_.losses) by_process[loss.pid] += loss.count;
    entry("Lost events by process", "string", describe_by_process(by_process));
  }
  if (!unnamed_share_by_library_.empty()) {
    std::string text;
    for (size_t i = 0; i < unnamed_share_by_library_.size() && i < 10; ++i) {
      char share[32];
      snprintf(share, sizeof share, " %.1f%%", 100.0 * unnamed_share_by_library_[i].second);
      text += (i ? ", " : "") + unnamed_share_by_library_[i].first + share;
    }
    entry("On-CPU samples in code without a symbol", "string", text);
  }
  if (!incomplete_by_process_.empty()) {
    std::string text;
    for (size_t i = 0; i < incomplete_by_process_.size() && i < 10; ++i) {
      const auto& [process, stacks] = incomplete_by_process_[i];
      char share[96];
      snprintf(share, sizeof share, ": %.1f%% of %.0f", 100.0 * (1.0 - stacks.share()),
               stacks.total);
      text += (i ? ", " : "") + process + share;
    }
    entry("Truncated user stacks by process", "string", text);
  }
  w.end_array();
  w.end_object();
  w.end_array();
  w.key("sampledThreads");
  w.number(static_cast<uint64_t>(thread_count));
  w.key("lostEvents");
  w.number(recording_.stats.lost_bpf_events + recording_.stats.lost_sideband_records);
  w.end_object();
}

void ProfileBuilder::write_libs(JsonWriter& w) {
  w.key("libs");
  w.begin_array();
  for (const LibraryDescription& d : tables_.libs) {
    w.begin_object();
    w.key("arch");
    w.string(d.arch);
    w.key("name");
    w.string(d.name);
    w.key("path");
    w.string(d.path);
    w.key("debugName");
    w.string(d.debug_name);
    w.key("debugPath");
    w.string(d.debug_path);
    w.key("breakpadId");
    w.string(d.breakpad_id);
    w.key("codeId");
    if (d.code_id.empty())
      w.null();
    else
      w.string(d.code_id);
    w.end_object();
  }
  w.end_array();
}

void ProfileBuilder::write_shared(JsonWriter& w) {
  auto length = [&](size_t n) {
    w.key("length");
    w.number(static_cast<uint64_t>(n));
  };
  auto nulls = [&](std::string_view name, size_t n) {
    w.key(name);
    w.begin_array();
    for (size_t i = 0; i < n; ++i) w.null();
    w.end_array();
  };
  w.key("shared");
  w.begin_object();

  // Stacks: a prefix tree, parents before children.
  const auto& stacks = output_stacks_.nodes();
  w.key("stackTable");
  w.begin_object();
  write_column(w, "frame", stacks, [&](const auto& node) { w.number(int64_t{node.key}); });
  w.key("prefixOffset");
  w.begin_array();
  for (size_t i = 0; i < stacks.size(); ++i) {
    auto parent = stacks[i].parent;
    w.number(parent == OutputStackTree::kRoot ? uint64_t{0} : static_cast<uint64_t>(i - parent));
  }
  w.end_array();
  length(stacks.size());
  w.end_object();

  const auto& frames = tables_.frames;
  w.key("frameTable");
  w.begin_object();
  write_column(w, "address", frames, [&](const auto& f) { w.number(f.address); });
  write_column(w, "lib", frames, [&](const auto& f) { w.number(int64_t{f.lib}); });
  write_column(w, "inlineDepth", frames, [&](const auto& f) { w.number(int64_t{f.inline_depth}); });
  write_column(w, "category", frames, [&](const auto& f) { w.number(int64_t{f.category}); });
  write_column(w, "subcategory", frames, [&](const auto&) { w.number(int64_t{0}); });
  write_column(w, "func", frames, [&](const auto& f) { w.number(int64_t{f.func}); });
  write_column(w, "nativeSymbol", frames, [&](const auto& f) {
    if (f.native_symbol < 0)
      w.null();
    else
      w.number(int64_t{f.native_symbol});
  });
  write_column(w, "innerWindowID", frames, [&](const auto&) { w.number(int64_t{0}); });
  write_column(w, "line", frames, [&](const auto& f) {
    if (f.line < 0)
      w.null();
    else
      w.number(f.line);
  });
  nulls("column", frames.size());
  nulls("originalLocation", frames.size());
  length(frames.size());
  w.end_object();

  const auto& funcs = tables_.funcs;
  w.key("funcTable");
  w.begin_object();
  write_column(w, "name", funcs, [&](const auto& f) { w.number(uint64_t{f.name.value}); });
  write_column(w, "isJS", funcs, [&](const auto&) { w.boolean(false); });
  write_column(w, "relevantForJS", funcs, [&](const auto&) { w.boolean(false); });
  write_column(w, "resource", funcs, [&](const auto& f) { w.number(int64_t{f.resource}); });
  write_column(w, "source", funcs, [&](const auto& f) {
    if (f.source < 0)
      w.null();
    else
      w.number(int64_t{f.source});
  });
  nulls("lineNumber", funcs.size());
  nulls("columnNumber", funcs.size());
  nulls("originalLocation", funcs.size());
  length(funcs.size());
  w.end_object();

  w.key("resourceTable");
  w.begin_object();
  write_column(w, "name", tables_.resource_name,
               [&](StringIndex s) { w.number(uint64_t{s.value}); });
  nulls("host", tables_.resource_name.size());
  write_column(w, "type", tables_.resource_name,
               [&](StringIndex) { w.number(int64_t{1}); });  // library
  length(tables_.resource_name.size());
  w.end_object();

  const auto& symbols = tables_.native_symbols;
  w.key("nativeSymbols");
  w.begin_object();
  write_column(w, "libIndex", symbols, [&](const auto& s) { w.number(int64_t{s.lib}); });
  write_column(w, "address", symbols, [&](const auto& s) { w.number(s.address); });
  write_column(w, "name", symbols, [&](const auto& s) { w.number(uint64_t{s.name.value}); });
  write_column(w, "functionSize", symbols, [&](const auto& s) {
    if (s.size == 0)
      w.null();
    else
      w.number(s.size);
  });
  length(symbols.size());
  w.end_object();

  const auto& sources = tables_.source_filenames;
  w.key("sources");
  w.begin_object();
  nulls("id", sources.size());
  write_column(w, "filename", sources, [&](StringIndex name) { w.number(uint64_t{name.value}); });
  write_column(w, "startLine", sources, [&](StringIndex) { w.number(int64_t{1}); });
  write_column(w, "startColumn", sources, [&](StringIndex) { w.number(int64_t{1}); });
  nulls("sourceMapURL", sources.size());
  nulls("content", sources.size());
  length(sources.size());
  w.end_object();
  write_empty_table(w, "sourceLocationTable", {"source", "line", "column"});

  w.key("stringArray");
  w.begin_array();
  for (const std::string& s : tables_.strings.strings()) w.string(s);
  w.end_array();
  w.end_object();
}

void ProfileBuilder::write_thread(JsonWriter& w, const Thread& thread) {
  const Process& process = model_.processes()[thread.process.value];
  const MonotonicNs zero = recording_.start_time;
  auto time_or_null = [&](const std::optional<MonotonicNs>& t) {
    if (t)
      w.number(ms_since(zero, *t));
    else
      w.null();
  };
  w.begin_object();
  w.key("processType");
  w.string("default");
  w.key("processStartupTime");
  w.number(ms_since(zero, process.start));
  w.key("processShutdownTime");
  time_or_null(process.end);
  w.key("registerTime");
  w.number(ms_since(zero, thread.start));
  w.key("unregisterTime");
  time_or_null(thread.end);
  w.key("pausedRanges");
  w.begin_array();
  w.end_array();
  w.key("name");
  w.string(thread.name);
  w.key("isMainThread");
  w.boolean(thread.tid.value == process.pid.value);
  w.key("pid");
  w.string(pid_string_.at(thread.process.value));
  w.key("tid");
  w.number(int64_t{thread.tid.value});
  w.key("processName");
  w.string(process.name);

  const auto& samples = thread.samples;
  w.key("samples");
  w.begin_object();
  write_column(w, "stack", samples, [&](const ThreadSample& s) {
    if (s.stack == ResolvedStackTree::kRoot)
      w.null();
    else
      w.number(uint64_t{output_stack_of_[s.stack]});
  });
  // Microsecond precision is what the front end shows, and shorter numbers write and
  // compress faster than nanoseconds.
  write_column(w, "time", samples, [&](const ThreadSample& s) {
    w.number(std::round(ms_since(zero, s.time) * 1000.0) / 1000.0);
  });
  write_column(w, "threadCPUDelta", samples,
               [&](const ThreadSample& s) { w.number(s.cpu_delta_ns); });
  const bool weighted = std::any_of(samples.begin(), samples.end(),
                                    [](const ThreadSample& s) { return s.weight != 1.0; });
  if (weighted) {
    write_column(w, "weight", samples, [&](const ThreadSample& s) { w.number(s.weight); });
  } else {
    w.key("weight");
    w.null();
  }
  w.key("weightType");
  w.string("samples");
  w.key("length");
  w.number(static_cast<uint64_t>(samples.size()));
  w.end_object();

  write_markers(w, thread);
  w.end_object();
}

void ProfileBuilder::measure_completeness(const std::vector<const Thread*>& threads,
                                          ProfileSummary& summary) const {
  std::map<uint32_t, StackCompleteness> by_process;  // by ProcessIndex
  for (const Thread* th : threads) {
    for (const ThreadSample& s : th->samples) {
      if (s.stack == ResolvedStackTree::kRoot ||
          model_.stacks().node(s.stack).key.lib == kOffCpuStateFrame)
        continue;
      const StackRoot root = root_of_[s.stack];
      if (root == StackRoot::kNoUserFrames) continue;
      StackCompleteness& process = by_process[th->process.value];
      process.total += s.weight;
      summary.user_stacks.total += s.weight;
      if (root != StackRoot::kThreadRoot) continue;
      process.complete += s.weight;
      summary.user_stacks.complete += s.weight;
    }
  }
  for (const auto& [process, stacks] : by_process) {
    if (stacks.complete >= stacks.total) continue;
    const Process& p = model_.processes()[process];
    summary.incomplete_user_stacks_by_process.emplace_back(
        p.name + " (" + std::to_string(p.pid.value) + ")", stacks);
  }
  std::stable_sort(summary.incomplete_user_stacks_by_process.begin(),
                   summary.incomplete_user_stacks_by_process.end(),
                   [](const auto& a, const auto& b) {
                     return a.second.total - a.second.complete > b.second.total - b.second.complete;
                   });
}

void ProfileBuilder::measure_unnamed(const std::vector<const Thread*>& threads) {
  std::unordered_map<int32_t, double> by_lib;
  double total = 0;
  for (const Thread* th : threads) {
    for (const ThreadSample& s : th->samples) {
      if (s.stack == ResolvedStackTree::kRoot ||
          model_.stacks().node(s.stack).key.lib == kOffCpuStateFrame)
        continue;
      total += s.weight;
      const int32_t frame = output_stacks_.node(output_stack_of_[s.stack]).key;
      if (unnamed_frames_.contains(frame))
        by_lib[tables_.frames[static_cast<size_t>(frame)].lib] += s.weight;
    }
  }
  for (const auto& [lib, weight] : by_lib)
    unnamed_share_by_library_.emplace_back(
        lib >= 0 ? tables_.libs[static_cast<size_t>(lib)].name : "(outside any mapping)",
        weight / total);
  std::sort(unnamed_share_by_library_.begin(), unnamed_share_by_library_.end(),
            [](const auto& a, const auto& b) { return a.second > b.second; });
}

std::vector<std::string> ProfileBuilder::unnamed_library_paths() const {
  std::vector<std::string> paths;
  for (size_t i = 0; i < unnamed_share_by_library_.size() && i < 3; ++i) {
    if (unnamed_share_by_library_[i].second < 0.01) break;
    for (const LibraryDescription& lib : tables_.libs) {
      if (lib.name == unnamed_share_by_library_[i].first && !lib.path.empty()) {
        paths.push_back(lib.path);
        break;
      }
    }
  }
  return paths;
}

// "name (pid): count, ..." for the processes with the highest counts.
std::string ProfileBuilder::describe_by_process(
    const std::unordered_map<Pid, uint64_t>& counts) const {
  std::vector<std::pair<Pid, uint64_t>> sorted(counts.begin(), counts.end());
  std::sort(sorted.begin(), sorted.end(),
            [](const auto& a, const auto& b) { return a.second > b.second; });
  std::string text;
  for (size_t i = 0; i < sorted.size() && i < 10; ++i) {
    std::string name = "?";
    for (const Process& p : model_.processes())
      if (p.pid == sorted[i].first) name = p.name;  // the latest entry of the pid
    text += (i ? ", " : "") + name + " (" + std::to_string(sorted[i].first.value) +
            "): " + std::to_string(sorted[i].second);
  }
  if (sorted.size() > 10) text += ", ...";
  return text;
}

void ProfileBuilder::write_loss_marker_schema(JsonWriter& w) {
  w.begin_object();
  w.key("name");
  w.string(kLossMarkerType);
  w.key("display");
  w.begin_array();
  for (const char* where : {"marker-chart", "marker-table", "timeline-overview"}) w.string(where);
  w.end_array();
  w.key("chartLabel");
  w.string("{marker.data.count} events lost");
  w.key("tooltipLabel");
  w.string("{marker.data.count} events lost (ring buffer full)");
  w.key("tableLabel");
  w.string("{marker.data.count} events lost in {marker.data.process}");
  w.key("description");
  w.string(
      "Samples and other events of this process that bpfprof lost because its ring buffer was full "
      "(noticed within ~50 ms after they happened); try a larger --buffer-size or a lower -F.");
  w.key("fields");
  w.begin_array();
  auto field = [&](const char* key, const char* label, const char* format) {
    w.begin_object();
    w.key("key");
    w.string(key);
    w.key("label");
    w.string(label);
    w.key("format");
    w.string(format);
    w.end_object();
  };
  field("count", "Events lost", "integer");
  field("process", "Process", "string");
  w.end_array();
  w.end_object();
}

void ProfileBuilder::write_markers(JsonWriter& w, const Thread& thread) {
  auto found = losses_by_thread_.find(&thread);
  if (found == losses_by_thread_.end()) {
    write_empty_table(w, "markers", {"data", "name", "startTime", "endTime", "phase", "category"});
    return;
  }
  const std::vector<const LossRecord*>& losses = found->second;
  const MonotonicNs zero = recording_.start_time;
  const StringIndex name = tables_.strings.intern("Events lost");
  w.key("markers");
  w.begin_object();
  write_column(w, "data", losses, [&](const LossRecord* loss) {
    w.begin_object();
    w.key("type");
    w.string(kLossMarkerType);
    w.key("count");
    w.number(loss->count);
    w.key("process");
    w.string(model_.processes()[thread.process.value].name + " (" +
             std::to_string(loss->pid.value) + ")");
    w.end_object();
  });
  write_column(w, "name", losses, [&](const LossRecord*) { w.number(uint64_t{name.value}); });
  write_column(w, "startTime", losses,
               [&](const LossRecord* loss) { w.number(ms_since(zero, loss->time)); });
  write_column(w, "endTime", losses, [&](const LossRecord*) { w.null(); });
  write_column(w, "phase", losses, [&](const LossRecord*) { w.number(int64_t{0}); });  // instant
  write_column(w, "category", losses, [&](const LossRecord*) { w.number(int64_t{0}); });
  w.key("length");
  w.number(static_cast<uint64_t>(losses.size()));
  w.end_object();
}

// Each loss goes to the main thread (else the first written thread) of the process entry of
// its pid that was alive then; losses of processes not in the profile go to the first thread.
void ProfileBuilder::assign_losses(const std::vector<const Thread*>& threads) {
  if (threads.empty()) return;
  for (const LossRecord& loss : recording_.losses) {
    // Noticed up to a poll after the loss: an entry that ended just before still counts.
    auto pick = [&](bool alive_then) {
      const Thread* target = nullptr;
      for (const Thread* th : threads) {
        const Process& p = model_.processes()[th->process.value];
        if (p.pid != loss.pid) continue;
        if (alive_then &&
            (loss.time < p.start || (p.end && p.end->value + 200000000 < loss.time.value)))
          continue;
        if (!target || th->tid.value == p.pid.value) target = th;
      }
      return target;
    };
    const Thread* target = pick(true);
    if (!target) target = pick(false);
    losses_by_thread_[target ? target : threads.front()].push_back(&loss);
  }
}

void ProfileBuilder::assign_pid_strings(const std::vector<const Thread*>& threads) {
  std::map<int32_t, std::vector<uint32_t>> entries_by_pid;  // in start order
  for (const Thread* th : threads) {
    const Process& p = model_.processes()[th->process.value];
    auto& entries = entries_by_pid[p.pid.value];
    if (std::find(entries.begin(), entries.end(), th->process.value) == entries.end())
      entries.push_back(th->process.value);
  }
  for (auto& [pid, entries] : entries_by_pid) {
    std::stable_sort(entries.begin(), entries.end(), [&](uint32_t a, uint32_t b) {
      return model_.processes()[a].start < model_.processes()[b].start;
    });
    for (size_t i = 0; i < entries.size(); ++i) {
      std::string s = std::to_string(pid);
      if (i + 1 < entries.size()) s += "." + std::to_string(i + 1);
      pid_string_[entries[i]] = s;
    }
  }
}

std::vector<std::pair<std::string, double>> ProfileBuilder::top_self_functions(
    const std::vector<const Thread*>& threads, size_t count) const {
  std::unordered_map<int32_t, double> weight_by_func;
  double total = 0;
  for (const Thread* th : threads) {
    for (const ThreadSample& s : th->samples) {
      if (s.stack == ResolvedStackTree::kRoot ||
          model_.stacks().node(s.stack).key.lib == kOffCpuStateFrame)
        continue;
      const int32_t frame = output_stacks_.node(output_stack_of_[s.stack]).key;
      weight_by_func[tables_.frames[static_cast<size_t>(frame)].func] += s.weight;
      total += s.weight;
    }
  }
  std::vector<std::pair<int32_t, double>> ranked(weight_by_func.begin(), weight_by_func.end());
  std::sort(ranked.begin(), ranked.end(),
            [](const auto& a, const auto& b) { return a.second > b.second; });
  if (ranked.size() > count) ranked.resize(count);
  std::vector<std::pair<std::string, double>> result;
  const auto& strings = tables_.strings.strings();
  for (const auto& [func, weight] : ranked) {
    const SharedTables::Func& f = tables_.funcs[static_cast<size_t>(func)];
    std::string name = strings[f.name.value];
    if (f.resource >= 0)
      name += " (" + strings[tables_.resource_name[static_cast<size_t>(f.resource)].value] + ")";
    result.emplace_back(std::move(name), weight / total);
  }
  return result;
}

std::vector<const Thread*> ProfileBuilder::threads_to_write(ProfileSummary& summary) const {
  std::vector<const Thread*> threads;
  std::set<uint32_t> processes;
  for (ThreadIndex ti : model_.display_order()) {
    const Thread& th = model_.threads()[ti.value];
    if (th.samples.empty() && !options_.keep_idle_threads) continue;
    if (model_.processes()[th.process.value].is_launcher) continue;
    threads.push_back(&th);
    processes.insert(th.process.value);
    summary.samples += th.samples.size();
  }
  summary.threads = threads.size();
  summary.processes = processes.size();
  return threads;
}

// Folded stacks: "process (pid);thread;outermost;...;innermost COUNT", one line per unique
// stack, counts in sampling intervals (a timer sample is 1, a wait its length), rounded.
ProfileSummary ProfileBuilder::write_collapsed(OutputSink& sink) {
  build_stacks();
  ProfileSummary summary;
  std::vector<const Thread*> threads = threads_to_write(summary);
  auto clean = [](std::string name) {
    for (char& ch : name)
      if (ch == ';')
        ch = ',';  // the frame separator
      else if (ch == '\n' || ch == '\r')
        ch = ' ';
    return name;
  };
  const auto& strings = tables_.strings.strings();
  std::map<std::string, double> weight_by_line;
  std::vector<std::string> names;
  for (const Thread* th : threads) {
    const Process& p = model_.processes()[th->process.value];
    const std::string prefix =
        clean(p.name) + " (" + std::to_string(p.pid.value) + ");" + clean(th->name);
    std::unordered_map<StackId, std::string> line_of;  // the same stack recurs often
    for (const ThreadSample& s : th->samples) {
      if (s.weight <= 0) continue;
      auto [it, inserted] = line_of.try_emplace(s.stack);
      if (inserted) {
        names.clear();
        if (s.stack != ResolvedStackTree::kRoot)
          for (auto n = output_stack_of_[s.stack]; n != OutputStackTree::kRoot;
               n = output_stacks_.node(n).parent)
            names.push_back(
                clean(strings[tables_.funcs[tables_.frames[output_stacks_.node(n).key].func]
                                  .name.value]));
        it->second = prefix;
        for (auto name = names.rbegin(); name != names.rend(); ++name) it->second += ";" + *name;
      }
      weight_by_line[it->second] += s.weight;
    }
  }
  std::string out;
  for (const auto& [line, weight] : weight_by_line) {
    const auto count = static_cast<uint64_t>(std::llround(weight));
    if (count == 0) continue;
    out += line;
    out += ' ';
    out += std::to_string(count);
    out += '\n';
    if (out.size() > (1 << 20)) {
      sink.write(out);
      out.clear();
    }
  }
  sink.write(out);
  summary.top_self_functions = top_self_functions(threads, 10);
  measure_completeness(threads, summary);
  return summary;
}

ProfileSummary ProfileBuilder::write(OutputSink& sink) {
  build_stacks();
  ProfileSummary summary;
  std::vector<const Thread*> threads = threads_to_write(summary);
  assign_pid_strings(threads);
  assign_losses(threads);
  measure_unnamed(threads);
  summary.unnamed_share_by_library = unnamed_share_by_library_;
  measure_completeness(threads, summary);
  user_stacks_ = summary.user_stacks;
  incomplete_by_process_ = summary.incomplete_user_stacks_by_process;
  summary.unnamed_library_paths = unnamed_library_paths();

  JsonWriter w(sink);
  w.begin_object();
  write_meta(w, threads.size());
  write_libs(w);
  w.key("threads");
  w.begin_array();
  for (const Thread* th : threads) write_thread(w, *th);
  w.end_array();
  w.key("pages");
  w.begin_array();
  w.end_array();
  write_shared(w);  // last: the thread names above are not in stringArray, so order is free
  w.end_object();
  w.flush();
  summary.top_self_functions = top_self_functions(threads, 10);
  return summary;
}

}  // namespace

ProfileSummary write_profile(const SessionModel& model, const Recording& recording,
                             OutputSink& sink, const ProfileOptions& options) {
  ProfileBuilder builder(model, recording, options);
  return options.format == OutputFormat::kCollapsed ? builder.write_collapsed(sink)
                                                    : builder.write(sink);
}

}  // namespace bpfprof
