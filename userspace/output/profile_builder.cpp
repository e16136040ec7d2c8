#include "userspace/output/profile_builder.h"
#include "userspace/output/go_thread_roles.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "symbols/util/text.h"
#include "symbols/util/untrusted_file.h"
#include "userspace/output/run_figures.h"
#include "userspace/output/waker_labels.h"

namespace bpfprof {

namespace {

// The front end stores frame and symbol addresses in 32-bit columns.
constexpr uint64_t kMaxRelativeAddress = 0xFFFFFFFFull;

// Noticed up to a poll after the loss: a process entry that ended this shortly before a
// loss still gets it.
constexpr uint64_t kLossNoticeSlackNs = 200000000;

struct StateFrame {
  const char* name;
  Category category;
};
StateFrame state_frame(OffCpuState state) {
  switch (state) {
    case OffCpuState::kIoWait:
      return {"[I/O wait]", Category::kIdle};
    case OffCpuState::kWaitingForCpu:
      return {"[waiting for CPU]", Category::kWaitingForCpu};
    default:
      return {"[sleeping]", Category::kIdle};
  }
}

// glibc's start-up functions under main and a thread's function: all the program's own
// frames are there (a frame-pointer walk ends here, as libc has no frame pointers).
bool is_libc_thread_start(const std::string& name) {
  return name == "__libc_start_call_main" || name == "__libc_start_main" ||
         name == "__libc_start_main_impl" || name == "start_thread";
}

class ProfileBuilder {
 public:
  ProfileBuilder(const SessionModel& model, const Recording& recording,
                 ProfileSymbolizer& symbolizer, const BuildOptions& options)
      : model_(model), recording_(recording), symbolizer_(symbolizer), options_(options) {}

  BuiltProfile build();

 private:
  // Stacks and frames.
  void find_anonymous_bases();
  void build_stacks();
  StackIndex append_frames(std::optional<StackIndex> prefix, const FrameKey& key);
  StackRoot classify_outermost(const FrameKey& key);
  bool is_tracing_frame(const FrameKey& key);
  bool is_label_frame(const FrameKey& key) const;
  const std::vector<FrameIndex>& frames_for(const FrameKey& key);
  FrameIndex pseudo_frame(Category category, const std::string& name);
  FrameIndex runtime_frame(RuntimeFrameId id);
  std::vector<FrameIndex> code_frames(const FrameKey& key);
  std::vector<SymbolizedFrame> symbolize(const FrameKey& key);
  uint32_t jit_owner(Pid pid);
  FrameIndex add_code_frame(const FrameKey& key, LibIndex library_lib, const SymbolizedFrame& s);
  LibIndex output_lib(LibId id);
  LibIndex module_lib(const std::string& module);
  LibIndex add_lib(LibraryDescription description);

  // Threads.
  std::vector<const Thread*> threads_to_write();
  void assign_pid_strings(const std::vector<const Thread*>& threads);
  void assign_losses(const std::vector<const Thread*>& threads);
  ThreadTables build_thread(const Thread& thread, WakerLabels& wakers);
  void add_loss_markers(const Thread& thread, MarkersTable& markers);
  void add_address_space_markers(const Thread& thread, MonotonicNs zero, MarkersTable& markers);

  // Summary figures.
  void measure(const std::vector<const Thread*>& threads);
  WrittenStacks written(const std::vector<const Thread*>& threads) const {
    return WrittenStacks{model_, threads, out_.shared, out_.libs, *output_stack_of_};
  }

  const SessionModel& model_;
  const Recording& recording_;
  ProfileSymbolizer& symbolizer_;
  const BuildOptions& options_;
  BuiltProfile out_;

  std::unordered_map<int32_t, LibIndex> lib_index_;  // by LibId
  std::unordered_map<std::string, LibIndex> module_lib_index_;
  std::vector<ResourceIndex> resource_of_lib_;
  // An [anon] library has no file: its addresses are made relative to the lowest one seen,
  // so they fit the front end's 32-bit address column (a JIT's code lies close together).
  std::unordered_map<int32_t, uint64_t> anonymous_base_;  // by LibId
  std::unordered_map<Pid, uint32_t> jit_owners_;          // jit_owner(), once per process
  // The frames one address becomes, outermost first (several where functions were inlined).
  std::unordered_map<FrameKey, std::vector<FrameIndex>, FrameKeyHash> frame_index_;
  // The output stack of each model stack, shared with the threads' samples tables.
  std::shared_ptr<std::vector<StackIndex>> output_stack_of_ =
      std::make_shared<std::vector<StackIndex>>();
  std::vector<StackRoot> root_of_;  // by model stack
  // Frames named only by their address (no symbol found): where symbolization failed.
  std::unordered_set<uint32_t> unnamed_frames_;

  std::unordered_map<uint32_t, std::string> pid_string_;  // by ProcessIndex
  std::unordered_map<const Thread*, std::vector<const LossRecord*>> losses_by_thread_;
};

BuiltProfile ProfileBuilder::build() {
  build_stacks();
  const std::vector<const Thread*> threads = threads_to_write();
  assign_pid_strings(threads);
  assign_losses(threads);
  measure(threads);
  WakerLabels wakers(model_, out_.shared, *output_stack_of_);
  for (const Thread* th : threads) out_.threads.push_back(build_thread(*th, wakers));
  out_.summary.top_self_functions = top_self_functions(written(threads), 10);
  if (recording_.record_memory) {
    out_.summary.memory_growth = memory_growth(written(threads), 3);
    out_.summary.address_space = address_space_growth(written(threads), 3);
    out_.summary.address_space_calls_without_stack =
        recording_.stats.address_space_calls_without_stack;
  }
  if (recording_.allocation_period) {
    out_.summary.memory_held = memory_held(written(threads), 3);
    out_.summary.allocation_period = recording_.allocation_period;
    out_.summary.allocator_calls = recording_.stats.allocator_calls;
    out_.summary.allocator_calls_without_stack = recording_.stats.allocator_calls_without_stack;
  }
  if (options_.embed_sources)
    out_.summary.embedded_sources = embed_sources(out_.shared, source_weights(written(threads)));
  out_.summary.top_wakers = wakers.top_wakers(threads);
  out_.memory = build_memory_counters(recording_, out_.threads);
  for (const MemoryCounter& c : out_.memory)
    out_.summary.memory_peaks.push_back({c.process_name, c.peak_bytes, c.peak_ms});
  return std::move(out_);
}

void ProfileBuilder::measure(const std::vector<const Thread*>& threads) {
  ProfileSummary& summary = out_.summary;
  if (options_.measure_unnamed)
    summary.unnamed_share_by_library = unnamed_share_by_library(written(threads), unnamed_frames_);
  UserStackFigures user_stacks = measure_user_stacks(written(threads), root_of_);
  summary.user_stacks = user_stacks.all;
  summary.incomplete_user_stacks_by_process = std::move(user_stacks.incomplete_by_process);
  summary.truncated_user_stacks_at = std::move(user_stacks.truncated_at);
  if (options_.measure_unnamed)
    summary.unnamed_library_paths =
        unnamed_library_paths(summary.unnamed_share_by_library, out_.libs);
}

void ProfileBuilder::find_anonymous_bases() {
  for (const auto& node : model_.stacks().nodes()) {
    if (node.key.kind != FrameKind::kNative || !model_.library(node.key.lib).anonymous_memory_of)
      continue;
    auto [it, inserted] = anonymous_base_.try_emplace(node.key.lib.value, node.key.address);
    if (!inserted) it->second = std::min(it->second, node.key.address);
  }
}

// Maps every stack of the model to a stack of output frames: a model frame becomes one
// output frame per function inlined at its address.
void ProfileBuilder::build_stacks() {
  find_anonymous_bases();
  std::vector<uint64_t> kernel_addresses;
  for (const auto& node : model_.stacks().nodes())
    if (node.key.kind == FrameKind::kKernel) kernel_addresses.push_back(node.key.address);
  symbolizer_.prepare_kernel(std::move(kernel_addresses));
  const auto& nodes = model_.stacks().nodes();
  output_stack_of_->reserve(nodes.size());
  root_of_.reserve(nodes.size());
  for (const auto& node : nodes) {
    // A label set's frame (userspace/model/label_set.h) is the root: the stack it labels is
    // judged from its own outermost frame, the next one.
    if (node.parent == ResolvedStackTree::kRoot && is_label_frame(node.key)) {
      root_of_.push_back(StackRoot::kNoUserFrames);
      output_stack_of_->push_back(append_frames(std::nullopt, node.key));
      continue;
    }
    const bool under_labels = node.parent != ResolvedStackTree::kRoot &&
                              nodes[node.parent].parent == ResolvedStackTree::kRoot &&
                              is_label_frame(nodes[node.parent].key);
    if (node.parent == ResolvedStackTree::kRoot || under_labels) {
      // The outermost frame: a user stack that does not begin at a thread root was cut
      // short (stack copy too small, no CFI, a frame-pointer walk gone astray) and says so.
      root_of_.push_back(classify_outermost(node.key));
      std::optional<StackIndex> out;
      if (under_labels) out = (*output_stack_of_)[node.parent];
      if (root_of_.back() == StackRoot::kTruncated)
        out = out_.shared.stacks.add(out, frames_for(FrameKey::truncated()).front());
      output_stack_of_->push_back(append_frames(out, node.key));
      continue;
    }
    root_of_.push_back(root_of_[node.parent]);
    StackId prefix = node.parent;
    // An off-CPU stack is taken from inside our sched_switch program: the tracing frames
    // between __schedule and the state frame are the profiler's, not the thread's.
    if (node.key.is_off_cpu_state())
      while (prefix != ResolvedStackTree::kRoot && is_tracing_frame(nodes[prefix].key))
        prefix = nodes[prefix].parent;
    std::optional<StackIndex> out;
    if (prefix != ResolvedStackTree::kRoot) out = (*output_stack_of_)[prefix];
    output_stack_of_->push_back(append_frames(out, node.key));
  }
}

StackIndex ProfileBuilder::append_frames(std::optional<StackIndex> prefix, const FrameKey& key) {
  for (FrameIndex frame : frames_for(key)) prefix = out_.shared.stacks.add(prefix, frame);
  return *prefix;  // frames_for() is never empty
}

StackRoot ProfileBuilder::classify_outermost(const FrameKey& key) {
  switch (key.kind) {
    case FrameKind::kKernel:
    case FrameKind::kOffCpuState:
    case FrameKind::kExec:  // the thread has no user stack at that moment
      return StackRoot::kNoUserFrames;
    case FrameKind::kUnmapped:
    case FrameKind::kTruncated:
    // Runtime frames sit where the native interpreter loop ran: above them there is always
    // the native code that started the interpreter, unless the native stack was cut.
    case FrameKind::kRuntime:
      return StackRoot::kTruncated;
    case FrameKind::kNative:
      break;
  }
  const Library& library = model_.library(key.lib);
  if (library.anonymous_memory_of) return StackRoot::kTruncated;  // JIT code starts no thread
  if (symbolizer_.is_thread_root(library.readable_path(), key.address))
    return StackRoot::kThreadRoot;
  return is_libc_thread_start(function_name(out_.shared, frames_for(key).front()))
             ? StackRoot::kThreadRoot
             : StackRoot::kTruncated;
}

bool ProfileBuilder::is_label_frame(const FrameKey& key) const {
  return key.kind == FrameKind::kRuntime &&
         recording_.runtime_frames.function_of(key.runtime_frame()).runtime ==
             RuntimeKind::kGoLabels;
}

bool ProfileBuilder::is_tracing_frame(const FrameKey& key) {
  return key.kind == FrameKind::kKernel &&
         is_tracing_function(function_name(out_.shared, frames_for(key).back()));
}

const std::vector<FrameIndex>& ProfileBuilder::frames_for(const FrameKey& key) {
  if (auto it = frame_index_.find(key); it != frame_index_.end()) return it->second;
  std::vector<FrameIndex> frames;
  switch (key.kind) {
    case FrameKind::kOffCpuState: {
      const StateFrame state = state_frame(key.off_cpu_state());
      frames.push_back(pseudo_frame(state.category, state.name));
      break;
    }
    case FrameKind::kTruncated:
      frames.push_back(pseudo_frame(Category::kOther, "[truncated]"));
      break;
    case FrameKind::kExec:
      frames.push_back(pseudo_frame(Category::kKernel, "[exec]"));
      break;
    case FrameKind::kUnmapped:
      frames.push_back(pseudo_frame(Category::kUser, hex_address(key.address)));
      unnamed_frames_.insert(frames.back().value);
      break;
    case FrameKind::kNative:
    case FrameKind::kKernel:
      frames = code_frames(key);
      break;
    case FrameKind::kRuntime:
      frames.push_back(runtime_frame(key.runtime_frame()));
      break;
  }
  return frame_index_.emplace(key, std::move(frames)).first->second;
}

// A runtime's function at a line: no library or address; the file is the function's source.
FrameIndex ProfileBuilder::runtime_frame(RuntimeFrameId id) {
  SharedTables& t = out_.shared;
  const RuntimeFunction& function = recording_.runtime_frames.function_of(id);
  FrameTable::Frame frame;
  frame.category = category_of(function.runtime);
  const SourceIndex source = t.sources.add(t.strings, function.filename);
  frame.func = t.funcs.add_script(t.strings, function.qualified_name, source, function.first_line);
  if (const uint32_t line = recording_.runtime_frames.frame(id).line) frame.line = line;
  return t.frames.add(frame);
}

// A frame without a library or address: only a name.
FrameIndex ProfileBuilder::pseudo_frame(Category category, const std::string& name) {
  SharedTables& t = out_.shared;
  FrameTable::Frame frame;
  frame.category = category;
  frame.func = t.funcs.add(t.strings, name, std::nullopt);
  return t.frames.add(frame);
}

std::vector<FrameIndex> ProfileBuilder::code_frames(const FrameKey& key) {
  const LibIndex library_lib = output_lib(key.lib);
  std::vector<FrameIndex> frames;
  for (const SymbolizedFrame& s : symbolize(key)) {
    frames.push_back(add_code_frame(key, library_lib, s));
    if (s.name.empty() || s.named_by_address) unnamed_frames_.insert(frames.back().value);
  }
  return frames;
}

// Whose perf map may name a process's JIT code: its effective user now while it runs (a
// server may have dropped privileges since its exec), else when it started; root's alone
// when neither is known.
uint32_t ProfileBuilder::jit_owner(Pid pid) {
  if (auto known = jit_owners_.find(pid); known != jit_owners_.end()) return known->second;
  const Process* latest = nullptr;
  for (const Process& p : model_.processes())
    if (p.pid == pid) latest = &p;
  std::optional<uint32_t> live;
  if (latest && !latest->end) live = process_effective_uid(pid.value);
  const uint32_t owner = live ? *live : latest && latest->euid ? *latest->euid : 0;
  return jit_owners_[pid] = owner;
}

std::vector<SymbolizedFrame> ProfileBuilder::symbolize(const FrameKey& key) {
  if (key.kind == FrameKind::kKernel) return symbolizer_.symbolize_kernel(key.address);
  const Library& library = model_.library(key.lib);
  if (!library.anonymous_memory_of)
    return symbolizer_.symbolize_in_file(library.readable_path(), key.address);
  const Pid pid = *library.anonymous_memory_of;
  std::vector<SymbolizedFrame> symbolized =
      symbolizer_.symbolize_jit(pid.value, jit_owner(pid), key.address);
  const uint64_t base = anonymous_base_.at(key.lib.value);
  for (SymbolizedFrame& f : symbolized) {
    f.relative_address -= base;
    if (f.symbol)
      f.symbol->relative_address =
          f.symbol->relative_address >= base ? f.symbol->relative_address - base : 0;
  }
  return symbolized;
}

FrameIndex ProfileBuilder::add_code_frame(const FrameKey& key, LibIndex library_lib,
                                          const SymbolizedFrame& s) {
  SharedTables& t = out_.shared;
  const bool kernel = key.kind == FrameKind::kKernel;
  const bool anonymous = !kernel && model_.library(key.lib).anonymous_memory_of;
  const LibIndex lib = s.kernel_module.empty() ? library_lib : module_lib(s.kernel_module);
  FrameTable::Frame frame;
  frame.category = kernel ? Category::kKernel : Category::kUser;
  if (s.relative_address <= kMaxRelativeAddress) {
    frame.address = static_cast<uint32_t>(s.relative_address);
    frame.lib = lib;
  }
  // Unnamed code is named by its address: absolute in the kernel and JIT code (as tools
  // print it), else relative to its library (stable across runs).
  const std::string name = !s.name.empty() ? s.name
                           : kernel || anonymous
                               ? hex_address(key.address)
                               : out_.libs[lib].name + "+" + hex_address(s.relative_address);
  // The source first, then the function's name: the order their strings are interned.
  std::optional<SourceIndex> source;
  if (s.file) source = t.sources.add(t.strings, *s.file);
  frame.func = t.funcs.add(t.strings, name, resource_of_lib_[lib.value], source);
  if (s.symbol && frame.lib && s.symbol->relative_address <= kMaxRelativeAddress)
    frame.native_symbol = t.native_symbols.add(t.strings, lib, s.symbol->relative_address,
                                               s.symbol->name, s.symbol->size);
  frame.inline_depth = s.inline_depth;
  frame.line = s.line;
  return t.frames.add(frame);
}

LibIndex ProfileBuilder::output_lib(LibId id) {
  if (auto it = lib_index_.find(id.value); it != lib_index_.end()) return it->second;
  const Library& lib = model_.library(id);
  LibraryDescription d;
  if (id == kKernelLib) {
    d = symbolizer_.describe_kernel();
  } else if (lib.anonymous_memory_of) {
    d.name = d.path = d.debug_name = d.debug_path = "[anon]";
  } else {
    d = symbolizer_.describe_library(lib.path, lib.readable_path(), lib.build_id);
  }
  const LibIndex index = add_lib(std::move(d));
  lib_index_.emplace(id.value, index);
  return index;
}

// A kernel module is its own library, named like perf does: "[module]".
LibIndex ProfileBuilder::module_lib(const std::string& module) {
  if (auto it = module_lib_index_.find(module); it != module_lib_index_.end()) return it->second;
  LibraryDescription d;
  d.name = d.path = d.debug_name = d.debug_path = "[" + module + "]";
  const LibIndex index = add_lib(std::move(d));
  module_lib_index_.emplace(module, index);
  return index;
}

// Each lib is also a resource (type library) of the same name, for the funcs in it.
LibIndex ProfileBuilder::add_lib(LibraryDescription description) {
  SharedTables& t = out_.shared;
  resource_of_lib_.push_back(t.resources.add(t.strings.intern(description.name)));
  return out_.libs.add(std::move(description));
}

std::vector<const Thread*> ProfileBuilder::threads_to_write() {
  std::vector<const Thread*> threads;
  std::set<uint32_t> processes;
  for (ThreadIndex ti : model_.display_order()) {
    const Thread& th = model_.threads()[ti.value];
    if (th.samples.empty() && th.allocations.empty() && th.address_space_calls.empty() &&
        !options_.keep_idle_threads)
      continue;
    if (model_.processes()[th.process.value].is_launcher) continue;
    threads.push_back(&th);
    processes.insert(th.process.value);
    out_.summary.samples += th.samples.size();
  }
  out_.summary.threads = threads.size();
  out_.summary.processes = processes.size();
  return threads;
}

// The profile's pid string of each process entry: the pid itself, except that earlier
// entries of a pid that has several (exec, reuse) get "PID.1", "PID.2", ... so that the
// front end, which groups threads by pid, keeps them apart.
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

// Each loss goes to the main thread (else the first written thread) of the process entry of
// its pid that was alive then; losses of processes not in the profile go to the first thread.
void ProfileBuilder::assign_losses(const std::vector<const Thread*>& threads) {
  if (threads.empty()) return;
  for (const LossRecord& loss : recording_.losses) {
    auto pick = [&](bool alive_then) {
      const Thread* target = nullptr;
      for (const Thread* th : threads) {
        const Process& p = model_.processes()[th->process.value];
        if (p.pid != loss.pid) continue;
        if (alive_then &&
            (loss.time < p.start || (p.end && p.end->value + kLossNoticeSlackNs < loss.time.value)))
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

ThreadTables ProfileBuilder::build_thread(const Thread& thread, WakerLabels& wakers) {
  const Process& process = model_.processes()[thread.process.value];
  const MonotonicNs zero = recording_.start_time;
  auto ms_or_none = [&](const std::optional<MonotonicNs>& t) -> std::optional<double> {
    if (!t) return std::nullopt;
    return ms_between(zero, *t);
  };
  ThreadTables out;
  out.name = thread.name;
  // A runtime's own name for the thread (a Java thread's), where the kernel's is cut short.
  if (auto named = recording_.runtime_thread_names.find({process.pid.value, thread.tid.value});
      named != recording_.runtime_thread_names.end())
    out.name = named->second;
  out.process_name = process.name;
  out.pid = process.pid;
  out.pid_string = pid_string_.at(thread.process.value);
  out.context = process.context;
  out.show_container = !same_container(process.context, recording_.recorder_context);
  out.tid = thread.tid;
  out.is_main_thread = thread.tid.value == process.pid.value;
  out.process_start_ms = ms_between(zero, process.start);
  out.process_end_ms = ms_or_none(process.end);
  out.register_ms = ms_between(zero, thread.start);
  out.unregister_ms = ms_or_none(thread.end);
  out.samples = SamplesTable(thread.samples, output_stack_of_, zero);
  out.allocations = AllocationsTable(thread.allocations, output_stack_of_, zero);
  // The front end labels a process's track with its main thread's name: it says the
  // container too, before a Go thread's role.
  if (out.is_main_thread && out.show_container) out.name = with_container(out.name, out.context);
  if (std::optional<std::string> role = go_thread_role(out_.shared, out.samples))
    out.name += " (" + *role + ")";
  add_loss_markers(thread, out.markers);
  add_address_space_markers(thread, zero, out.markers);
  wakers.add_woken_markers(thread, zero, out.markers);
  return out;
}

void ProfileBuilder::add_loss_markers(const Thread& thread, MarkersTable& markers) {
  auto found = losses_by_thread_.find(&thread);
  if (found == losses_by_thread_.end()) return;
  const StringIndex name = out_.shared.strings.intern("Events lost");
  const std::string& process_name = model_.processes()[thread.process.value].name;
  for (const LossRecord* loss : found->second)
    markers.add({name, ms_between(recording_.start_time, loss->time),
                 MarkersTable::EventsLost{
                     loss->count, process_name + " (" + std::to_string(loss->pid.value) + ")"}});
}

const char* address_space_call_name(AddressSpaceCallKind call) {
  switch (call) {
    case AddressSpaceCallKind::kMmap:
      return "mmap";
    case AddressSpaceCallKind::kMunmap:
      return "munmap";
    case AddressSpaceCallKind::kBrk:
      return "brk";
    case AddressSpaceCallKind::kMremap:
      return "mremap";
  }
  return "?";
}

void ProfileBuilder::add_address_space_markers(const Thread& thread, MonotonicNs zero,
                                               MarkersTable& markers) {
  for (const ThreadAddressSpaceCall& c : thread.address_space_calls) {
    const char* call = address_space_call_name(c.what.call);
    std::optional<StackIndex> cause;
    if (c.stack != ResolvedStackTree::kRoot) cause = (*output_stack_of_)[c.stack];
    markers.add({out_.shared.strings.intern(call), ms_between(zero, c.time),
                 MarkersTable::AddressSpaceChange{call, c.what.change, c.sampled_bytes,
                                                  c.what.address, cause}});
  }
}

}  // namespace

const std::string& function_name(const SharedTables& shared, FrameIndex frame) {
  return shared.strings.strings()[shared.funcs[shared.frames[frame].func].name.value];
}

BuiltProfile build_profile(const SessionModel& model, const Recording& recording,
                           ProfileSymbolizer& symbolizer, const BuildOptions& options) {
  return ProfileBuilder(model, recording, symbolizer, options).build();
}

}  // namespace bpfprof
