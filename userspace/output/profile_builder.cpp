#include "userspace/output/profile_builder.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "symbols/util/text.h"
#include "symbols/util/untrusted_file.h"

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

// The frames of the profiler's own BPF program and the tracepoint machinery under it.
bool is_tracing_function(const std::string& name) {
  return name.starts_with("bpf_prog_") || name.starts_with("bpf_trace_run") ||
         name.starts_with("__bpf_trace_") || name.starts_with("__traceiter_") ||
         name.starts_with("bpf_trampoline_");
}

// The wake-up machinery between whatever woke a thread and the scheduler: skipped to find the
// function that did (hrtimer_wakeup, pipe_write, futex_wake).
bool is_wake_up_function(const std::string& name) {
  for (const char* prefix : {"try_to_wake_up", "wake_up", "__wake_up", "ttwu", "autoremove_wake",
                             "default_wake_function", "woken_wake_function", "swake_up",
                             "__swake_up", "rcuwait_wake_up", "wake_q", "complete"})
    if (name.starts_with(prefix)) return true;
  return false;
}

const char* state_name(OffCpuState state) {
  return state == OffCpuState::kIoWait ? "I/O wait" : "sleeping";
}

// Where a softirq's handlers run (handle_softirqs since 6.10, __do_softirq before).
bool is_softirq_function(const std::string& name) {
  return name == "handle_softirqs" || name == "__do_softirq";
}

bool is_off_cpu_sample(const SessionModel& model, const ThreadSample& s) {
  return s.stack != ResolvedStackTree::kRoot && model.stacks().node(s.stack).key.is_off_cpu_state();
}

class ProfileBuilder {
 public:
  ProfileBuilder(const SessionModel& model, const Recording& recording,
                 ProfileSymbolizer& symbolizer, const BuildOptions& options)
      : model_(model), recording_(recording), symbolizer_(symbolizer), options_(options) {}

  BuiltProfile build();

 private:
  // How a stack begins, decided by its outermost frame.
  enum class StackRoot : uint8_t { kNoUserFrames, kThreadRoot, kTruncated };

  // Stacks and frames.
  void find_anonymous_bases();
  void build_stacks();
  StackIndex append_frames(std::optional<StackIndex> prefix, const FrameKey& key);
  StackRoot classify_outermost(const FrameKey& key);
  bool is_tracing_frame(const FrameKey& key);
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
  ThreadTables build_thread(const Thread& thread);
  void add_loss_markers(const Thread& thread, MarkersTable& markers);
  void add_woken_markers(const Thread& thread, MarkersTable& markers);
  std::optional<StackIndex> cause_stack(std::optional<StackId> stack) const;
  std::string waking_function(std::optional<StackIndex> cause) const;
  std::string interrupt_kind(std::optional<StackIndex> cause) const;
  std::string process_label(ProcessIndex index) const;
  std::string waker_label(const Waker& waker, std::optional<StackIndex> cause) const;
  void summarize_wakers(const std::vector<const Thread*>& threads);

  // Summary figures.
  void measure_completeness(const std::vector<const Thread*>& threads);
  void measure_unnamed(const std::vector<const Thread*>& threads);
  std::vector<std::string> unnamed_library_paths() const;
  std::vector<std::pair<std::string, double>> top_self_functions(
      const std::vector<const Thread*>& threads, size_t count) const;
  std::vector<double> source_weights(const std::vector<const Thread*>& threads) const;
  FrameIndex leaf_frame(StackId stack) const {
    return out_.shared.stacks.frame((*output_stack_of_)[stack]);
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
  if (options_.measure_unnamed) measure_unnamed(threads);
  measure_completeness(threads);
  if (options_.measure_unnamed) out_.summary.unnamed_library_paths = unnamed_library_paths();
  for (const Thread* th : threads) out_.threads.push_back(build_thread(*th));
  out_.summary.top_self_functions = top_self_functions(threads, 10);
  if (options_.embed_sources)
    out_.summary.embedded_sources = embed_sources(out_.shared, source_weights(threads));
  summarize_wakers(threads);
  return std::move(out_);
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
  const auto& nodes = model_.stacks().nodes();
  output_stack_of_->reserve(nodes.size());
  root_of_.reserve(nodes.size());
  for (const auto& node : nodes) {
    if (node.parent == ResolvedStackTree::kRoot) {
      // The outermost frame: a user stack that does not begin at a thread root was cut
      // short (stack copy too small, no CFI, a frame-pointer walk gone astray) and says so.
      root_of_.push_back(classify_outermost(node.key));
      std::optional<StackIndex> out;
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

ProfileBuilder::StackRoot ProfileBuilder::classify_outermost(const FrameKey& key) {
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
    if (th.samples.empty() && !options_.keep_idle_threads) continue;
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

ThreadTables ProfileBuilder::build_thread(const Thread& thread) {
  const Process& process = model_.processes()[thread.process.value];
  const MonotonicNs zero = recording_.start_time;
  auto ms_or_none = [&](const std::optional<MonotonicNs>& t) -> std::optional<double> {
    if (!t) return std::nullopt;
    return ms_between(zero, *t);
  };
  ThreadTables out;
  out.name = thread.name;
  out.process_name = process.name;
  out.pid = process.pid;
  out.pid_string = pid_string_.at(thread.process.value);
  out.tid = thread.tid;
  out.is_main_thread = thread.tid.value == process.pid.value;
  out.process_start_ms = ms_between(zero, process.start);
  out.process_end_ms = ms_or_none(process.end);
  out.register_ms = ms_between(zero, thread.start);
  out.unregister_ms = ms_or_none(thread.end);
  out.samples = SamplesTable(thread.samples, output_stack_of_, zero);
  add_loss_markers(thread, out.markers);
  add_woken_markers(thread, out.markers);
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

std::string ProfileBuilder::process_label(ProcessIndex index) const {
  const Process& p = model_.processes()[index.value];
  return p.name + " (" + std::to_string(p.pid.value) + ")";
}

// "comm (tid)" for a thread; for an interrupt, what it was and the function that woke the
// thread, from its stack: "interrupt: hrtimer_wakeup".
std::string ProfileBuilder::waker_label(const Waker& waker, std::optional<StackIndex> cause) const {
  if (waker.context == WakerContext::kThread)
    return waker.comm + " (" + std::to_string(waker.tid.value) + ")";
  const std::string function = waking_function(cause);
  return interrupt_kind(cause) + (function.empty() ? "" : ": " + function);
}

// The waker's stack as written, without the profiler's own frames at its leaf (the
// sched_waking program and the tracepoint machinery under it).
std::optional<StackIndex> ProfileBuilder::cause_stack(std::optional<StackId> stack) const {
  if (!stack) return std::nullopt;
  std::optional<StackIndex> out = (*output_stack_of_)[*stack];
  while (out && is_tracing_function(function_name(out_.shared, out_.shared.stacks.frame(*out))))
    out = out_.shared.stacks.prefix(*out);
  return out;
}

// The innermost function of a waker's stack that is not wake-up machinery: what woke the
// thread, for an interrupt (hrtimer_wakeup: a timer expired).
std::string ProfileBuilder::waking_function(std::optional<StackIndex> cause) const {
  for (std::optional<StackIndex> s = cause; s; s = out_.shared.stacks.prefix(*s)) {
    const std::string& name = function_name(out_.shared, out_.shared.stacks.frame(*s));
    if (!is_wake_up_function(name)) return name;
  }
  return "";
}

// "softirq" when the waker's kernel stack runs a softirq's handlers, else "interrupt".
std::string ProfileBuilder::interrupt_kind(std::optional<StackIndex> cause) const {
  for (std::optional<StackIndex> s = cause; s; s = out_.shared.stacks.prefix(*s))
    if (is_softirq_function(function_name(out_.shared, out_.shared.stacks.frame(*s))))
      return "softirq";
  return "interrupt";
}

void ProfileBuilder::add_woken_markers(const Thread& thread, MarkersTable& markers) {
  const MonotonicNs zero = recording_.start_time;
  for (const WokenWait& wait : thread.woken_waits) {
    const Waker& waker = model_.wakers()[wait.waker];
    MarkersTable::Woken data;
    data.state = state_name(wait.state);
    data.duration_ms = static_cast<double>(wait.woken.value - wait.start.value) / 1e6;
    data.cause = cause_stack(wait.cause);
    data.waker = waker_label(waker, data.cause);
    if (waker.context == WakerContext::kThread) {
      data.waker_thread = waker.comm;
      data.waker_tid = waker.tid.value;
      data.waker_process = wait.waker_process ? process_label(*wait.waker_process)
                                              : "pid " + std::to_string(waker.pid.value);
    } else {
      data.waker_thread = interrupt_kind(data.cause);
    }
    const StringIndex name = out_.shared.strings.intern("Woken by " + data.waker);
    markers.add(
        {name, ms_between(zero, wait.start), std::move(data), ms_between(zero, wait.woken)});
  }
}

// The top wakers of each process written, by the waiting time they ended.
void ProfileBuilder::summarize_wakers(const std::vector<const Thread*>& threads) {
  std::set<uint32_t> seen;
  std::vector<std::pair<uint64_t, ProcessWakers>> ranked;
  for (const Thread* th : threads) {
    if (!seen.insert(th->process.value).second) continue;
    const Process& p = model_.processes()[th->process.value];
    if (p.wakers.empty() && p.interrupt_wakers.empty()) continue;
    // By label: interrupts of one kind through one function are one waker.
    std::map<std::string, WakerShare> by_label;
    auto add = [&](const std::string& label, const WakerShare& share) {
      by_label[label].waited_ns += share.waited_ns;
      by_label[label].wakings += share.wakings;
    };
    for (const auto& [waker, share] : p.wakers) add(waker_label(model_.wakers()[waker], {}), share);
    const Waker interrupt{WakerContext::kInterrupt, Pid{0}, Tid{0}, ""};
    for (const auto& [stack, share] : p.interrupt_wakers)
      add(waker_label(interrupt,
                      stack == ResolvedStackTree::kRoot ? std::nullopt : cause_stack(stack)),
          share);
    std::vector<std::pair<std::string, WakerShare>> shares(by_label.begin(), by_label.end());
    std::stable_sort(shares.begin(), shares.end(), [](const auto& a, const auto& b) {
      return a.second.waited_ns > b.second.waited_ns;
    });
    uint64_t total = 0;
    for (const auto& [label, share] : shares) total += share.waited_ns;
    ProcessWakers entry{process_label(th->process), {}};
    for (size_t i = 0; i < shares.size() && i < 5; ++i)
      entry.top.push_back(WakerTotal{shares[i].first,
                                     static_cast<double>(shares[i].second.waited_ns) / 1e6,
                                     shares[i].second.wakings});
    ranked.emplace_back(total, std::move(entry));
  }
  std::stable_sort(ranked.begin(), ranked.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  for (size_t i = 0; i < ranked.size() && i < 5; ++i)
    out_.summary.top_wakers.push_back(std::move(ranked[i].second));
}

void ProfileBuilder::measure_completeness(const std::vector<const Thread*>& threads) {
  ProfileSummary& summary = out_.summary;
  std::map<uint32_t, StackCompleteness> by_process;  // by ProcessIndex
  for (const Thread* th : threads) {
    for (const ThreadSample& s : th->samples) {
      if (s.stack == ResolvedStackTree::kRoot || is_off_cpu_sample(model_, s)) continue;
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

// The share of on-CPU sample weight whose leaf frame has no name, by library.
void ProfileBuilder::measure_unnamed(const std::vector<const Thread*>& threads) {
  std::unordered_map<int32_t, double> by_lib;  // -1: outside any mapping
  double total = 0;
  for (const Thread* th : threads) {
    for (const ThreadSample& s : th->samples) {
      if (s.stack == ResolvedStackTree::kRoot || is_off_cpu_sample(model_, s)) continue;
      total += s.weight;
      const FrameIndex frame = leaf_frame(s.stack);
      if (!unnamed_frames_.contains(frame.value)) continue;
      const std::optional<LibIndex> lib = out_.shared.frames[frame].lib;
      by_lib[lib ? static_cast<int32_t>(lib->value) : -1] += s.weight;
    }
  }
  auto& shares = out_.summary.unnamed_share_by_library;
  for (const auto& [lib, weight] : by_lib)
    shares.emplace_back(
        lib >= 0 ? out_.libs[LibIndex{static_cast<uint32_t>(lib)}].name : "(outside any mapping)",
        weight / total);
  std::sort(shares.begin(), shares.end(),
            [](const auto& a, const auto& b) { return a.second > b.second; });
}

std::vector<std::string> ProfileBuilder::unnamed_library_paths() const {
  const auto& shares = out_.summary.unnamed_share_by_library;
  std::vector<std::string> paths;
  for (size_t i = 0; i < shares.size() && i < 3; ++i) {
    if (shares[i].second < 0.01) break;
    for (const LibraryDescription& lib : out_.libs.rows()) {
      if (lib.name == shares[i].first && !lib.path.empty()) {
        paths.push_back(lib.path);
        break;
      }
    }
  }
  return paths;
}

std::vector<std::pair<std::string, double>> ProfileBuilder::top_self_functions(
    const std::vector<const Thread*>& threads, size_t count) const {
  const SharedTables& t = out_.shared;
  std::unordered_map<int32_t, double> weight_by_func;
  double total = 0;
  for (const Thread* th : threads) {
    for (const ThreadSample& s : th->samples) {
      if (s.stack == ResolvedStackTree::kRoot || is_off_cpu_sample(model_, s)) continue;
      weight_by_func[static_cast<int32_t>(t.frames[leaf_frame(s.stack)].func.value)] += s.weight;
      total += s.weight;
    }
  }
  std::vector<std::pair<int32_t, double>> ranked(weight_by_func.begin(), weight_by_func.end());
  std::sort(ranked.begin(), ranked.end(),
            [](const auto& a, const auto& b) { return a.second > b.second; });
  if (ranked.size() > count) ranked.resize(count);
  std::vector<std::pair<std::string, double>> result;
  for (const auto& [func, weight] : ranked) {
    const FuncTable::Func& f = t.funcs[FuncIndex{static_cast<uint32_t>(func)}];
    std::string name = t.strings.strings()[f.name.value];
    if (f.resource) name += " (" + t.strings.strings()[t.resources.name(*f.resource).value] + ")";
    result.emplace_back(std::move(name), weight / total);
  }
  return result;
}

// On-CPU sample weight per source file: a sample counts once for each file on its stack, so
// that the files of the hot functions and of their callers come first.
std::vector<double> ProfileBuilder::source_weights(
    const std::vector<const Thread*>& threads) const {
  const SharedTables& t = out_.shared;
  std::unordered_map<uint32_t, double> weight_by_stack;  // by output stack
  for (const Thread* th : threads) {
    for (const ThreadSample& s : th->samples) {
      if (s.stack == ResolvedStackTree::kRoot || is_off_cpu_sample(model_, s)) continue;
      weight_by_stack[(*output_stack_of_)[s.stack].value] += s.weight;
    }
  }
  std::vector<double> weights(t.sources.size());
  std::vector<int64_t> counted_for(t.sources.size(), -1);  // the stack a file last counted for
  for (const auto& [stack, weight] : weight_by_stack) {
    for (std::optional<StackIndex> i = StackIndex{stack}; i; i = t.stacks.prefix(*i)) {
      const std::optional<SourceIndex> source = t.funcs[t.frames[t.stacks.frame(*i)].func].source;
      if (!source || counted_for[source->value] == stack) continue;
      counted_for[source->value] = stack;
      weights[source->value] += weight;
    }
  }
  return weights;
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
