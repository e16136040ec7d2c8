// Owns the loaded BPF programs (through the libbpf skeleton), their links and the event
// ring buffers, and feeds the events it reads into the ingest pipeline.
#pragma once

#include <chrono>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "symbols/util/unique_handle.h"
#include "userspace/capture/ingest.h"
#include "userspace/capture/kernel_unwind.h"
#include "userspace/capture/perf_events.h"
#include "userspace/capture/ring_reader.h"
#include "userspace/model/recording.h"

struct bpf_map;
struct bpf_program;

struct profiler_bpf;
struct walker_bpf;
namespace bpfprof {
class EventLogWriter;
}
struct bpf_link;
namespace bpfprof {
class BpfUnwindMaps;
}

namespace bpfprof {

class BpfPrograms {
 public:
  static constexpr uint32_t kDefaultRingBufferBytes = 16 << 20;
  struct Config {
    bool track_all_processes = false;
    bool record_off_cpu = false;
    uint64_t sampling_interval_ns = 1000000;
    // 0 for frame-pointer user stacks, else how much of the user stack to copy per sample
    // (at first; see adapt_stack_copies) for unwinding in userspace.
    uint32_t user_stack_copy_bytes = 0;
    // With the kernel walk: its fallback copies take the whole stack (up to the most a copy
    // can hold) where its end is known, not user_stack_copy_bytes. Off for dwarf,SIZE.
    bool fallback_copies_whole_stack = false;
    uint32_t ring_buffer_bytes = kDefaultRingBufferBytes;  // a power of two, at least a page
    // 0 copies every DWARF stack; else user stacks are walked in the kernel first
    // (unwind_maps()), with room for that many table rows at most: the row array starts with
    // room for unwind_initial_rows and grows as tables need (UnwindMapsSink::grow_rows).
    // Both are rounded up to whole chunks (BPFPROF_UNWIND_CHUNK_ROWS).
    uint32_t unwind_row_capacity = 0;
    uint32_t unwind_initial_rows = 0;
    // Who wakes tracked threads, with the waker's stack (sched_waking); the program is not
    // even loaded without.
    bool record_wakers = false;
    // record --memory: each process's resident memory as it changes (rss_stat); the program is
    // not loaded without.
    bool record_memory = false;
    // record --allocations: the C allocator's calls sampled, one per this many bytes on
    // average (0: not recorded; the programs are not loaded).
    uint64_t allocation_period = 0;
    // The most sampled blocks held at once that --allocations follows to their free (some 5 MB
    // of kernel memory; at the default interval, 32 GiB of blocks held).
    static constexpr uint32_t kSampledBlocks = 65536;
    // The most processes followed at once (not system-wide): the BPF table's size.
    uint32_t max_tracked_processes = 65536;
    // Entries of the per-thread caches (the Python, Ruby and BEAM readers' thread states, the
    // waker pairs): least-recently-used ones are dropped and found again. A machine or a busy
    // attached process may run tens of thousands of threads; a launched command's tree seldom
    // a few thousand at once, and each 65536-entry map takes ~3 ms to create at start-up.
    uint32_t thread_cache_entries = kManyThreads;
    static constexpr uint32_t kManyThreads = 65536;
    static constexpr uint32_t kCommandThreads = 8192;
    // record --cgroup: how many subtrees set_cgroup_filters gives (at most
    // BPFPROF_MAX_CGROUP_FILTERS); a process that execs in one is tracked from then on.
    uint32_t cgroup_filters = 0;
    // Sampling starts with walkers built without the runtimes' readers (less than half the
    // verifier's time), the full ones put in their place once loaded (take_full_walkers); the
    // runtimes' processes are told to the kernel side only then. For a launched command, which
    // starts after sampling does and needs a while to show what runtime it is.
    bool runtime_readers_later = false;
  };
  // Where the load's time went (record -v): wall time of each part, from this process.
  struct LoadTimes {
    double main_object_ms = 0;                              // the maps and the small programs
    double core_btf_ms = 0;                                 // the objects' minimal BTF (core_btf.h)
    double walkers_ms = 0;                                  // every walker program loaded
    std::vector<std::pair<std::string, double>> walker_ms;  // each, on its loader thread
    // Config::runtime_readers_later: when the full walkers took the first ones' place, from
    // the start of the walkers' load (0 until then).
    double full_walkers_ms = 0;
  };
  // Loads and verifies the programs. Throws std::runtime_error with a one-line message.
  explicit BpfPrograms(const Config& config);
  ~BpfPrograms();
  BpfPrograms(const BpfPrograms&) = delete;
  BpfPrograms& operator=(const BpfPrograms&) = delete;

  // Attaches the lifecycle tracepoints (fork, exec, exit, rename), the walkers' (sched_switch,
  // sched_waking), and with --memory the system calls' entry and exit.
  void attach_lifecycle();
  // Attaches the sample program to each sampling perf event, and with --memory the page-fault
  // program to each page-fault event.
  void attach_sampling(const SamplingEvents& events);
  // record --allocations: the allocator probes on malloc, calloc, realloc, memalign
  // (aligned_alloc), posix_memalign and free of the C library at `libc` (every process that
  // maps it; the programs keep the tracked ones).
  void attach_allocator_probes(const std::string& libc);
  void detach_sampling();
  // Once everything is read: every program detached, the rings and the unwinder's maps unmapped
  // (none of the calls that read or write them may follow); the programs stay loaded.
  void release_buffers();
  // A process to sample, with its children. A command bpfprof launched is tracked from its
  // fork, before its exec: until then it runs bpfprof's launcher, and its samples get the
  // exec pseudo-frame instead of bpfprof's own frames (and need no unwinding).
  enum class Tracked : uint8_t { kProcess, kLaunchedBeforeExec };
  void track_process(Pid pid, Tracked how = Tracked::kProcess);
  // The subtrees of record --cgroup, as many as Config::cgroup_filters said.
  void set_cgroup_filters(const std::vector<bpfprof_cgroup_filter>& filters);

  // Waits until events are pending (the buffer is filling up), a signal, or the timeout.
  // Until the ring buffer needs reading, timeout_ms pass, a signal comes or one of `also` (fds,
  // such as pidfds) is readable.
  void wait(int timeout_ms, const std::vector<int>& also = {});
  // Feeds the pending events into `pipeline`, for at most ~100 ms (the rest stays for the
  // next call). Returns the number of events consumed, or a negative errno.
  int consume(IngestPipeline& pipeline);
  // False when the last consume() stopped at its time budget with events left in the ring.
  bool ring_emptied() const { return ring_emptied_; }
  // Whether the kernel side reads the frames of any runtime's process (runtimes/runtime.h).
  bool runtime_processes_known() const;
  // Config::runtime_readers_later: the full walkers in the first ones' place once loaded (and
  // from then on the runtimes' processes told to the kernel side); whether they are. Called at
  // every consume(); `wait` for their load (at the recording's end, for its time).
  bool take_full_walkers(bool wait = false);
  // Consumes everything already in the ring buffer without waiting.
  int drain(IngestPipeline& pipeline);
  // During consume(): reads the forks, execs and exits that came into their ring since it
  // was read, into the pipeline consume() feeds (events are read one ring after the other:
  // a child's first sample can be read before its fork otherwise).
  void read_lifecycle_ring();
  // Events that did not fit in the ring buffer: in all, per CPU, and per process (tgid).
  uint64_t lost_events() const;
  // Children not followed because the table of tracked processes was full.
  uint64_t processes_not_followed() const;
  std::vector<uint64_t> lost_events_per_cpu() const;
  std::unordered_map<Pid, uint64_t> lost_events_by_process() const;

  // DWARF mode: a process whose stacks are cut at the copy's end gets larger copies (up to
  // the largest), instead of a fixed size for all.
  void adapt_stack_copies(IngestPipeline& pipeline);

  // The in-kernel unwinder's maps; null when stacks are not walked in the kernel.
  UnwindMapsSink* unwind_maps();
  // Walks that fell back to a stack copy, per enum bpfprof_unwind_fallback.
  std::vector<uint64_t> unwind_fallbacks() const;
  // Kernel memory of the unwinder's maps: the row array (allocated whole) and the process
  // entries written.
  uint64_t unwind_map_bytes() const;
  // The kernel side learns of the runtimes' processes found (and forgets those gone): done at
  // every consume(), and as soon as the targets of -p / -a are known.
  void apply_runtime_changes(IngestPipeline& pipeline);

  const LoadTimes& load_times() const { return load_times_; }

  // Every event read from now on is also written to `log` (raw, for replay); null stops.
  void save_events_to(EventLogWriter* log) { event_log_ = log; }

 private:
  // A per-CPU array map's first entry on each CPU (empty if unreadable).
  std::vector<uint64_t> per_cpu_counts(const bpf_map* map) const;

  static int on_event(void* context, void* data, size_t size);
  int consume_rings();
  static std::vector<const char*> walker_programs(const Config& config);
  static void set_read_only_data(profiler_bpf* skel, const Config& config);
  void configure_main_object(const Config& config);
  void apply_stack_copy_changes(IngestPipeline& pipeline);

  uint32_t user_stack_copy_bytes_;
  LoadTimes load_times_;

  struct SkeletonDeleter {
    void operator()(profiler_bpf* skel) const;
  };
  struct WalkerSkeletonDeleter {
    void operator()(walker_bpf* skel) const;
  };
  struct LinkDeleter {
    void operator()(bpf_link* link) const;
  };

  // The maps and the small programs; the walker programs, each in a walker object of its own
  // sharing those maps (bpf_walkers.cpp), the sample program's among them.
  using Skeleton = std::unique_ptr<profiler_bpf, SkeletonDeleter>;
  using WalkerSkeleton = std::unique_ptr<walker_bpf, WalkerSkeletonDeleter>;
  // A walker object of `build` (with every runtime's reader, or without the late ones) for
  // `program` alone, its maps the main object's, its CO-RE relocations against the BTF at
  // `btf_path`; the loading of walker_programs() each in one (times into `times`); and the
  // loading that starts sampling (the first walkers, the full ones after them or at once).
  enum class WalkerBuild { kWithoutRuntimeReaders, kFull };
  WalkerSkeleton open_walker(const char* program, WalkerBuild build,
                             const std::string& btf_path) const;
  std::vector<WalkerSkeleton> load_walkers(
      const Config& config, WalkerBuild build, const std::string& btf_path,
      std::vector<std::pair<std::string, double>>& times) const;
  void load_walker_programs(const Config& config, UniqueFd core_btf);
  void fill_walker_slots(const std::vector<WalkerSkeleton>& walkers);
  // The minimal BTF the objects' CO-RE relocations are made against, in a memory file.
  static UniqueFd prepare_core_btf();
  void attach_allocator_probe(const std::string& libc, const std::string& function, uint64_t call,
                              bpf_program* program, bool at_return);

  Skeleton skeleton_;
  std::vector<WalkerSkeleton> walker_skeletons_;
  bpf_program* page_fault_program_ = nullptr;          // --memory only
  bpf_program* allocator_call_program_ = nullptr;      // --allocations only
  bpf_program* address_space_exit_program_ = nullptr;  // --memory only
  // Config::runtime_readers_later: the BTF the full walkers' load reads, and that load; after
  // skeleton_, so that the load is waited for before its maps go.
  UniqueFd core_btf_;
  std::future<std::vector<WalkerSkeleton>> full_walkers_;
  bool runtime_readers_in_ = true;
  MonotonicNs walkers_started_;
  std::unique_ptr<BpfUnwindMaps> unwind_maps_;
  std::vector<std::unique_ptr<bpf_link, LinkDeleter>> sample_links_;
  std::unique_ptr<bpf_link, LinkDeleter> address_space_exit_link_;
  // The allocator's uprobes.
  std::vector<std::unique_ptr<bpf_link, LinkDeleter>> probe_links_;
  // Each ring mapped once, its data too (ring_reader.h). The lifecycle ring is read first, and
  // also alone (read_lifecycle_ring).
  std::unique_ptr<RingReader> lifecycle_ring_;
  std::unique_ptr<RingReader> events_ring_;
  IngestPipeline* target_ = nullptr;  // where on_event sends events, during consume/drain
  std::optional<std::chrono::steady_clock::time_point> poll_deadline_;  // set during poll()
  uint64_t events_this_poll_ = 0;
  bool ring_emptied_ = true;
  EventLogWriter* event_log_ = nullptr;
};

}  // namespace bpfprof
