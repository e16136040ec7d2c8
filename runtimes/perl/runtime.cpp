#include "runtimes/perl/runtime.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <unordered_set>
#include <vector>

#include "runtimes/kit/merge.h"
#include "runtimes/kit/pending_stacks.h"
#include "runtimes/kit/remote_memory.h"
#include "runtimes/kit/split_runtime.h"
#include "runtimes/perl/events.h"
#include "runtimes/perl/names.h"
#include "runtimes/perl/processes.h"

namespace bpfprof {
namespace {

const RuntimeFunction kPerlUnreadSub{"[unknown Perl sub]", "", 0, RuntimeKind::kPerl};
const RuntimeFunction kPerlDeeperFrames{
    "[unknown Perl frames: more than " + std::to_string(BPFPROF_MAX_PERL_FRAMES) + " deep]", "", 0,
    RuntimeKind::kPerl};
const RuntimeFunction kPerlUnreadableFrames{"[unknown Perl frames: unreadable context]", "", 0,
                                            RuntimeKind::kPerl};

// What naming one process's subs may read in all; strings are bounded (names.h).
constexpr uint64_t kPerlProcessBudgetBytes = 64ull << 20;
// Names and files kept: past this many (string evals, closures at new addresses), they are
// read again as they come.
constexpr size_t kMaxKeptPerlNames = size_t{1} << 16;

struct PendingPerl {
  Pid pid;
  MonotonicNs time;
  std::vector<bpfprof_perl_frame> frames;
  uint32_t status = BPFPROF_PERL_STACK_COMPLETE;
};

class PerlStacks {
 public:
  explicit PerlStacks(const PerlProcesses& processes) : processes_(processes) {}

  void take_event(const void* data, size_t size, RuntimeStats& stats);
  bool has_frames_for(Tid tid) const { return pending_.contains(tid); }
  void merge_into(Pid pid, Tid tid, MonotonicNs time, std::vector<uint64_t>& user,
                  Recording& recording);
  void forget(Pid pid) {
    std::erase_if(names_, [&](const auto& entry) { return std::get<0>(entry.first) == pid; });
    std::erase_if(files_, [&](const auto& entry) { return entry.first.first == pid; });
    bytes_read_.erase(pid);
    with_frames_.erase(pid);
    pending_.forget(pid);
  }

 private:
  // kind, cv (or SV), name key: what names a frame
  using NameKey = std::tuple<Pid, uint8_t, uint64_t, uint64_t>;
  RemoteReader reader_for(ProcessMemory& memory, Pid pid) {
    const uint64_t used = bytes_read_[pid];
    return RemoteReader(memory, kPerlProcessBudgetBytes - std::min(used, kPerlProcessBudgetBytes),
                        kMaxPerlFileBytes);
  }
  // The frame's name; nullopt: it names nothing (an entersub's SV that is no XSUB) or
  // could not be read (`unread`).
  std::optional<std::string> name_of(Pid pid, const PerlInterpreter& interpreter,
                                     const bpfprof_perl_frame& frame, RuntimeStats& stats);
  std::optional<std::string> read_name(RemoteReader& reader, const PerlLayout& layout,
                                       const bpfprof_perl_frame& frame);
  std::optional<std::string> require_name(Pid pid, const PerlInterpreter& interpreter,
                                          const bpfprof_perl_frame& f,
                                          const bpfprof_perl_frame& text_frame,
                                          RuntimeStats& stats);
  const std::string& file_of(Pid pid, uint64_t file);
  // What a require's file names are (Foo/Bar.pm, ./lib.pl, /etc/x.conf): a string read since
  // it was freed and reused seldom is.
  static bool looks_like_file(const std::optional<std::string>& name) {
    return name && name->find_first_of("./") != std::string::npos;
  }
  static std::optional<std::string> read_file(RemoteReader& reader, uint64_t file) {
    return file ? reader.c_string(file) : std::nullopt;
  }
  void fit_activations_to_loops(const std::vector<uint64_t>& user,
                                const std::function<bool(uint64_t)>& runs_op_loop);
  ActivationFrame frame_of(Pid pid, const std::string& name, const bpfprof_perl_frame& f,
                           bool entry, Recording& recording);

  const PerlProcesses& processes_;
  PendingStacks<PendingPerl> pending_;
  std::unordered_set<Pid> with_frames_;
  std::map<NameKey, std::optional<std::string>> names_;  // nullopt: names nothing
  std::map<std::pair<Pid, uint64_t>, std::string> files_;
  std::map<Pid, uint64_t> bytes_read_;
  struct PerlMergeFrame {
    ActivationFrame frame;
    uint8_t kind = BPFPROF_PERL_FRAME_SUB;
    uint8_t flags = 0;
  };
  std::vector<PerlMergeFrame> scratch_;
  std::vector<ActivationFrame> activation_frames_;
};

void PerlStacks::take_event(const void* data, size_t size, RuntimeStats& stats) {
  bpfprof_perl_stack_event e;
  const std::optional<size_t> depth =
      copy_frame_event(data, size, e, &bpfprof_perl_stack_event::depth);
  if (!depth) return;
  count_frame_event(stats, size, BPFPROF_MAX_PERL_FRAMES);
  if (e.status == BPFPROF_PERL_STACK_IDLE) ++stats.no_thread_state;
  if (e.status == BPFPROF_PERL_STACK_UNREADABLE) ++stats.unreadable;
  if (e.status == BPFPROF_PERL_STACK_AT_LIMIT) ++stats.at_limit;
  PendingPerl& pending = pending_.put(e.header);
  if (with_frames_.insert(pending.pid).second) ++stats.interpreters;
  pending.status = e.status;
  pending.frames.assign(e.frames, e.frames + *depth);
}

std::optional<std::string> PerlStacks::read_name(RemoteReader& reader, const PerlLayout& layout,
                                                 const bpfprof_perl_frame& f) {
  switch (f.kind) {
    case BPFPROF_PERL_FRAME_SUB:
      return read_perl_frame_sub(reader, layout, f.cv, f.name);
    case BPFPROF_PERL_FRAME_XSUB:
      if (auto sub = read_perl_xsub(reader, layout, f.cv)) return std::move(sub->name);
      return std::nullopt;
    case BPFPROF_PERL_FRAME_REQUIRE: {
      // The %INC key ("Digest/SHA.pm"), or, once require is done with it, the file its
      // statement was in: the required file's.
      const std::optional<uint64_t> text = reader.word(f.name + layout.sv_u);
      std::optional<std::string> file = text ? reader.c_string(*text) : std::nullopt;
      if (!looks_like_file(file)) file = read_file(reader, f.file);
      return "require " + (looks_like_file(file) ? *file : std::string("[unknown file]"));
    }
    case BPFPROF_PERL_FRAME_EVAL:
      return f.flags & BPFPROF_PERL_EVAL_TEXT ? "(eval \"\")" : "(eval)";
    case BPFPROF_PERL_FRAME_FILE:
      return "<main>";
    case BPFPROF_PERL_FRAME_SORT:
      return "[sort block]";
    default:
      return std::nullopt;
  }
}

std::optional<std::string> PerlStacks::name_of(Pid pid, const PerlInterpreter& interpreter,
                                               const bpfprof_perl_frame& f, RuntimeStats& stats) {
  if (names_.size() >= kMaxKeptPerlNames) names_.clear();
  const bool keyed = f.kind == BPFPROF_PERL_FRAME_SUB || f.kind == BPFPROF_PERL_FRAME_XSUB ||
                     f.kind == BPFPROF_PERL_FRAME_REQUIRE;
  auto [it, inserted] =
      names_.try_emplace(NameKey{pid, f.kind, keyed ? f.cv : 0, keyed ? f.name : f.flags});
  if (inserted) {
    ProcessMemory memory(pid);
    RemoteReader reader = reader_for(memory, pid);
    it->second = read_name(reader, *interpreter.layout, f);
    bytes_read_[pid] += reader.bytes_read();
    if (keyed) ++stats.code_objects_read;
  }
  return it->second;
}

// A require's name from the text the BPF side read with the sample ("..." where it filled the
// frame's bytes), else as name_of reads it now.
std::optional<std::string> PerlStacks::require_name(Pid pid, const PerlInterpreter& interpreter,
                                                    const bpfprof_perl_frame& f,
                                                    const bpfprof_perl_frame& text_frame,
                                                    RuntimeStats& stats) {
  const char* bytes = reinterpret_cast<const char*>(&text_frame);
  const std::string text(bytes, strnlen(bytes, BPFPROF_PERL_TEXT_BYTES));
  if (!looks_like_file(text)) return name_of(pid, interpreter, f, stats);
  ++stats.code_objects_read;
  return "require " + text + (text.size() + 1 < BPFPROF_PERL_TEXT_BYTES ? "" : "...");
}

const std::string& PerlStacks::file_of(Pid pid, uint64_t file) {
  if (files_.size() >= kMaxKeptPerlNames) files_.clear();
  auto [it, inserted] = files_.try_emplace({pid, file});
  if (inserted && file) {
    ProcessMemory memory(pid);
    RemoteReader reader = reader_for(memory, pid);
    it->second = read_file(reader, file).value_or("");
    bytes_read_[pid] += reader.bytes_read();
  }
  return it->second;
}

ActivationFrame PerlStacks::frame_of(Pid pid, const std::string& name, const bpfprof_perl_frame& f,
                                     bool entry, Recording& recording) {
  const RuntimeFunction function{name, file_of(pid, f.file), 0, RuntimeKind::kPerl};
  return {raw_runtime_frame(recording.runtime_frames.intern(function, f.line)), entry};
}

// A run of the op loop whose frames are there without its native frame: an XSUB (List::Util's
// first) or pp_sort between two runs of their block (innermost), or perl compiling the program
// (BEGIN, use) or running END blocks, while its file-level code does not run (outermost).
void PerlStacks::fit_activations_to_loops(const std::vector<uint64_t>& user,
                                          const std::function<bool(uint64_t)>& runs_op_loop) {
  const size_t loops = static_cast<size_t>(std::count_if(user.begin(), user.end(), runs_op_loop));
  auto is_entry = [](const PerlMergeFrame& f) { return f.frame.entry; };
  const size_t activations =
      static_cast<size_t>(std::count_if(scratch_.begin(), scratch_.end(), is_entry));
  if (activations != loops + 1 || scratch_.size() < 2) return;
  const auto innermost_entry = std::find_if(scratch_.begin(), scratch_.end(), is_entry);
  if (innermost_entry->flags & BPFPROF_PERL_IN_BLOCK)
    scratch_.erase(scratch_.begin(), innermost_entry + 1);
  else if (scratch_.back().kind == BPFPROF_PERL_FRAME_FILE && scratch_.end()[-2].frame.entry)
    scratch_.pop_back();
}

// Each run of the op loop (a native Perl_runops_standard frame) runs the frames from one
// entered from C (retop 0: a sub call_sv called, BEGIN, a sort or List::Util block) or the
// file-level code, inward. An eval C pushed around such a call is not shown (caller() shows
// it as "(eval)"): the sub inside is where its op loop begins.
void PerlStacks::merge_into(Pid pid, Tid tid, MonotonicNs time, std::vector<uint64_t>& user,
                            Recording& recording) {
  const std::optional<PendingPerl> taken = pending_.take(pid, tid, time);
  const PerlInterpreter* interpreter = processes_.find(pid);
  if (!taken || !interpreter || taken->frames.empty()) return;
  RuntimeStats& stats = recording.stats.runtimes[RuntimeKind::kPerl];
  scratch_.clear();
  const std::vector<bpfprof_perl_frame>& frames = taken->frames;
  for (size_t i = 0; i < frames.size(); ++i) {
    const bpfprof_perl_frame& f = frames[i];
    if (f.kind == BPFPROF_PERL_FRAME_TEXT) continue;
    if (f.kind == BPFPROF_PERL_FRAME_EVAL && (f.flags & BPFPROF_PERL_EVAL_OF_C)) continue;
    const bool with_text = i + 1 < frames.size() && frames[i + 1].kind == BPFPROF_PERL_FRAME_TEXT;
    const std::optional<std::string> name =
        with_text ? require_name(pid, *interpreter, f, frames[i + 1], stats)
                  : name_of(pid, *interpreter, f, stats);
    if (f.kind == BPFPROF_PERL_FRAME_XSUB && !name) continue;  // not an XSUB's call
    if (!name)
      ++stats.unnamed_frames;
    else
      ++stats.frames;
    scratch_.push_back({frame_of(pid, name ? *name : kPerlUnreadSub.qualified_name, f,
                                 (f.flags & BPFPROF_PERL_FROM_C) != 0, recording),
                        f.kind, f.flags});
  }
  const bool cut = taken->status == BPFPROF_PERL_STACK_AT_LIMIT ||
                   taken->status == BPFPROF_PERL_STACK_UNREADABLE;
  if (cut) {
    const RuntimeFunction& rest =
        taken->status == BPFPROF_PERL_STACK_AT_LIMIT ? kPerlDeeperFrames : kPerlUnreadableFrames;
    scratch_.push_back({{raw_runtime_frame(recording.runtime_frames.intern(rest, 0)), true},
                        BPFPROF_PERL_FRAME_FILE});
  }
  auto runs_op_loop = [&](uint64_t pc) { return interpreter->runs_op_loop(pc); };
  if (!cut) fit_activations_to_loops(user, runs_op_loop);
  if (scratch_.empty()) return;
  activation_frames_.clear();
  for (const PerlMergeFrame& f : scratch_) activation_frames_.push_back(f.frame);
  MergedStack merged =
      merge_runtime_frames(user, activation_frames_, runs_op_loop, ActivationMatch::kFromInnermost);
  if (merged.mismatched) ++stats.mismatched;
  if (merged.runtime_frames > 0) ++stats.merged;
  user = std::move(merged.frames);
}

class PerlRuntime final : public SplitRuntime<PerlProcesses, PerlStacks> {
 public:
  PerlRuntime() : SplitRuntime(RuntimeKind::kPerl, "perl_processes") {}
  void apply_kernel_changes(RuntimeKernelMaps& maps, Recording& recording) override {
    apply(maps, processes_.take_changes(), recording);
  }
};

}  // namespace

std::unique_ptr<Runtime> make_perl_runtime() { return std::make_unique<PerlRuntime>(); }

}  // namespace bpfprof
