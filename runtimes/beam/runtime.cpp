#include "runtimes/beam/runtime.h"

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "runtimes/beam/events.h"
#include "runtimes/beam/names.h"
#include "runtimes/beam/processes.h"
#include "runtimes/kit/pending_stacks.h"
#include "runtimes/kit/remote_memory.h"
#include "runtimes/kit/split_runtime.h"

namespace bpfprof {
namespace {

const RuntimeFunction kBeamJitCode{"[BEAM JIT code]", "", 0, RuntimeKind::kBeam};
const RuntimeFunction kBeamMoreFrames{"[more Erlang frames: a dirty call's stack past " +
                                          std::to_string(BPFPROF_BEAM_SAVED_WORDS) + " words]",
                                      "", 0, RuntimeKind::kBeam};

// What naming one emulator's functions may read in all.
constexpr uint64_t kBeamProcessBudgetBytes = 64ull << 20;
// How often the code index's generation is checked (a module loaded or purged).
constexpr auto kGenerationCheck = std::chrono::milliseconds(100);

struct PendingBeam {
  Pid pid;
  MonotonicNs time;
  uint64_t process_id = 0;
  uint64_t registered = 0;
  uint64_t current[3] = {};
  uint64_t code_modules = 0;
  uint32_t code_index = 0;
  uint32_t status = BPFPROF_BEAM_STACK_NONE;
  std::vector<uint64_t> saved;
};

// `<0.N.S>`: the pid term's number and serial (erl_term.h, 64-bit).
std::string pid_text(uint64_t id) {
  return "<0." + std::to_string((id >> 4) & 0x7fff) + "." + std::to_string((id >> 19) & 0x1fff) +
         ">";
}

class BeamStacks {
 public:
  explicit BeamStacks(const BeamProcesses& processes) : processes_(processes) {}

  void take_event(const void* data, size_t size, RuntimeStats& stats);
  // Every stack of an emulator is looked at: its JIT frames are named with or without an event.
  bool has_frames_for(Tid) const { return true; }
  void merge_into(Pid pid, Tid tid, MonotonicNs time, std::vector<uint64_t>& user,
                  Recording& recording);
  void forget(Pid pid) {
    emulators_.erase(pid);
    with_frames_.erase(pid);
    pending_.forget(pid);
  }

 private:
  struct Emulator {
    explicit Emulator(const BeamEmulator& emulator) : index(*emulator.layout, emulator.addresses) {}
    BeamCodeIndex index;
    uint64_t bytes_read = 0;
    uint64_t tables_seen = 0;
    std::chrono::steady_clock::time_point checked{};
    std::unordered_map<uint64_t, std::optional<RuntimeFrameId>> functions;  // by pc
    std::map<std::tuple<uint64_t, uint64_t, uint64_t>, std::optional<RuntimeFrameId>> mfas;
    std::map<std::pair<uint64_t, uint64_t>, RuntimeFrameId> processes;
  };
  // Runs `read` with a reader of the emulator's memory, within what its budget has left, and
  // counts what it read.
  template <typename Read>
  static void reading(Emulator& e, Pid pid, Read read) {
    ProcessMemory memory(pid);
    RemoteReader reader(
        memory, kBeamProcessBudgetBytes - std::min(e.bytes_read, kBeamProcessBudgetBytes), 0);
    read(reader);
    e.bytes_read += reader.bytes_read();
  }
  // Forgets the names by pc once another code map is read: a pc may hold another function.
  static bool forget_names_if_remapped(Emulator& e) {
    if (e.index.tables_read() == e.tables_seen) return false;
    e.tables_seen = e.index.tables_read();
    e.functions.clear();
    return true;
  }
  Emulator& emulator_of(Pid pid, const BeamEmulator& emulator, const PendingBeam* event);
  std::optional<RuntimeFrameId> function_frame(Emulator& e, Pid pid, uint64_t pc,
                                               Recording& recording);
  std::optional<RuntimeFrameId> mfa_frame(Emulator& e, Pid pid, const uint64_t mfa[3],
                                          Recording& recording);
  RuntimeFrameId process_frame(Emulator& e, Pid pid, const PendingBeam& event,
                               Recording& recording);
  void put_dirty_frames(Emulator& e, Pid pid, const PendingBeam& event, Recording& recording);

  const BeamProcesses& processes_;
  PendingStacks<PendingBeam> pending_;
  std::unordered_map<Pid, Emulator> emulators_;
  std::unordered_set<Pid> with_frames_;
  std::vector<uint64_t> scratch_;
};

void BeamStacks::take_event(const void* data, size_t size, RuntimeStats& stats) {
  bpfprof_beam_stack_event e;
  const std::optional<size_t> count =
      copy_frame_event(data, size, e, &bpfprof_beam_stack_event::count);
  if (!count) return;
  count_frame_event(stats, size, BPFPROF_MAX_BEAM_SAVED_FRAMES);
  PendingBeam& pending = pending_.put(e.header);
  pending.process_id = e.process_id;
  pending.registered = e.registered;
  std::copy(std::begin(e.current), std::end(e.current), pending.current);
  pending.code_modules = e.code_modules;
  pending.code_index = e.code_index;
  pending.status = e.status;
  pending.saved.assign(e.frames, e.frames + *count);
}

// The emulator's naming state, its code map the one of the sample (its event's), or, for a
// sample without one, read again every kGenerationCheck.
BeamStacks::Emulator& BeamStacks::emulator_of(Pid pid, const BeamEmulator& emulator,
                                              const PendingBeam* event) {
  auto it = emulators_.find(pid);
  if (it == emulators_.end()) it = emulators_.try_emplace(pid, emulator).first;
  Emulator& e = it->second;
  const auto now = std::chrono::steady_clock::now();
  if (event && !e.index.following(event->code_index, event->code_modules)) {
    reading(e, pid, [&](RemoteReader& reader) {
      e.index.follow(reader, event->code_index, event->code_modules);
    });
  } else if (!event && now - e.checked >= kGenerationCheck) {
    e.checked = now;
    reading(e, pid, [&](RemoteReader& reader) { e.index.check_generation(reader); });
  }
  forget_names_if_remapped(e);
  return e;
}

std::optional<RuntimeFrameId> BeamStacks::function_frame(Emulator& e, Pid pid, uint64_t pc,
                                                         Recording& recording) {
  auto [it, inserted] = e.functions.try_emplace(pc);
  if (!inserted) return it->second;
  std::optional<BeamMfa> mfa;
  reading(e, pid, [&](RemoteReader& reader) { mfa = e.index.function_at(reader, pc); });
  ++recording.stats.runtimes[RuntimeKind::kBeam].code_objects_read;
  if (forget_names_if_remapped(e))  // read a newer code map on the way
    it = e.functions.try_emplace(pc).first;
  if (mfa)
    it->second = recording.runtime_frames.intern(
        RuntimeFunction{beam_function_name(*mfa), mfa->module, 0, RuntimeKind::kBeam}, 0);
  return it->second;
}

std::optional<RuntimeFrameId> BeamStacks::mfa_frame(Emulator& e, Pid pid, const uint64_t mfa[3],
                                                    Recording& recording) {
  auto [it, inserted] = e.mfas.try_emplace(std::tuple{mfa[0], mfa[1], mfa[2]});
  if (!inserted) return it->second;
  std::optional<std::string> module, function;
  reading(e, pid, [&](RemoteReader& reader) {
    module = e.index.atom_text(reader, mfa[0]);
    function = e.index.atom_text(reader, mfa[1]);
  });
  if (module && function && mfa[2] <= kMaxBeamArity) {
    const BeamMfa named{*module, *function, static_cast<uint32_t>(mfa[2])};
    it->second = recording.runtime_frames.intern(
        RuntimeFunction{beam_function_name(named), named.module, 0, RuntimeKind::kBeam}, 0);
  }
  return it->second;
}

RuntimeFrameId BeamStacks::process_frame(Emulator& e, Pid pid, const PendingBeam& event,
                                         Recording& recording) {
  auto [it, inserted] = e.processes.try_emplace(std::pair{event.process_id, event.registered});
  if (!inserted) return it->second;
  std::string name = "[process " + pid_text(event.process_id);
  if (event.registered)
    reading(e, pid, [&](RemoteReader& reader) {
      if (std::optional<std::string> atom = e.index.atom_text(reader, event.registered))
        name += " " + erlang_atom(*atom);
    });
  it->second =
      recording.runtime_frames.intern(RuntimeFunction{name + "]", "", 0, RuntimeKind::kBeam}, 0);
  return it->second;
}

// Outside a dirty call: the function it runs (current), its process's Erlang frames, the process.
void BeamStacks::put_dirty_frames(Emulator& e, Pid pid, const PendingBeam& event,
                                  Recording& recording) {
  if (std::optional<RuntimeFrameId> current = mfa_frame(e, pid, event.current, recording))
    scratch_.push_back(raw_runtime_frame(*current));
  const BeamEmulator& emulator = *processes_.find(pid);
  for (uint64_t cp : event.saved) {
    if (cp == emulator.normal_exit) continue;
    if (std::optional<RuntimeFrameId> id = function_frame(e, pid, cp - 1, recording))
      scratch_.push_back(raw_runtime_frame(*id));
  }
  if (event.status == BPFPROF_BEAM_STACK_DIRTY_CUT)
    scratch_.push_back(raw_runtime_frame(recording.runtime_frames.intern(kBeamMoreFrames, 0)));
  scratch_.push_back(raw_runtime_frame(process_frame(e, pid, event, recording)));
}

void BeamStacks::merge_into(Pid pid, Tid tid, MonotonicNs time, std::vector<uint64_t>& user,
                            Recording& recording) {
  const std::optional<PendingBeam> event = pending_.take(pid, tid, time);
  const BeamEmulator* emulator = processes_.find(pid);
  if (!emulator) return;
  RuntimeStats& stats = recording.stats.runtimes[RuntimeKind::kBeam];
  Emulator& e = emulator_of(pid, *emulator, event ? &*event : nullptr);
  const bool dirty = event && (event->status == BPFPROF_BEAM_STACK_DIRTY ||
                               event->status == BPFPROF_BEAM_STACK_DIRTY_CUT);
  scratch_.clear();
  size_t outside_erlang = 0;  // where the process's frame goes: past the outermost Erlang frame
  for (size_t i = 0; i < user.size(); ++i) {
    const uint64_t ip = user[i];
    if (emulator->in_jit(ip)) {
      if (ip == emulator->normal_exit) continue;
      if (std::optional<RuntimeFrameId> id =
              function_frame(e, pid, i == 0 ? ip : ip - 1, recording)) {
        scratch_.push_back(raw_runtime_frame(*id));
        outside_erlang = scratch_.size();
        ++stats.frames;
      } else if (scratch_.empty()) {  // the JIT's shared code, shown only where it runs
        scratch_.push_back(raw_runtime_frame(recording.runtime_frames.intern(kBeamJitCode, 0)));
      }
      continue;
    }
    scratch_.push_back(ip);
    if (!event) continue;
    if (dirty && (emulator->call_dirty_nif.contains(ip) || emulator->call_dirty_bif.contains(ip))) {
      put_dirty_frames(e, pid, *event, recording);
    } else if (!dirty && emulator->call_nif.contains(ip)) {
      if (std::optional<RuntimeFrameId> nif = mfa_frame(e, pid, event->current, recording))
        scratch_.push_back(raw_runtime_frame(*nif));
    }
  }
  if (event && !dirty && event->status == BPFPROF_BEAM_STACK_RUNNING && outside_erlang > 0)
    scratch_.insert(scratch_.begin() + static_cast<ptrdiff_t>(outside_erlang),
                    raw_runtime_frame(process_frame(e, pid, *event, recording)));
  if (outside_erlang > 0 || dirty) {
    ++stats.merged;
    if (with_frames_.insert(pid).second) ++stats.interpreters;
  }
  user.swap(scratch_);
}

class BeamRuntime final : public SplitRuntime<BeamProcesses, BeamStacks> {
 public:
  BeamRuntime() : SplitRuntime(RuntimeKind::kBeam, "beam_processes") {}
  void apply_kernel_changes(RuntimeKernelMaps& maps, Recording& recording) override {
    processes_.refresh();
    apply(maps, processes_.take_changes(), recording);
  }
  void merge_into(Pid pid, Tid tid, MonotonicNs time, std::vector<uint64_t>& user,
                  Recording& recording) override {
    if (processes_.find(pid)) stacks_.merge_into(pid, tid, time, user, recording);
  }
};

}  // namespace

std::unique_ptr<Runtime> make_beam_runtime() { return std::make_unique<BeamRuntime>(); }

}  // namespace bpfprof
