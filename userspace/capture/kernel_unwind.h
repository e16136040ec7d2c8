// Keeps the in-kernel unwinder's maps (bpf/unwind_maps.h) in step with the recording: every
// executable file a tracked process maps gets its compact unwind table built (on a worker
// thread, by the table builder, which caches tables on disk) and written once to the global
// page and row arrays, its rules to the shared rule array (symbols/dwarf/compact_unwind_table.h);
// each process's executable mappings are written as a sorted array saying, per
// mapping, where its file's rows are, or that the walker must use frame pointers (JIT code)
// or fall back to a stack copy (table not loaded yet). Updated from the lifecycle events the
// ingest pipeline resolves: MMAP2 side band and /proc snapshots, exec, fork, exit.
//
// The maps are reached through UnwindMapsSink only, so the bookkeeping is tested without BPF.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "bpf/unwind_maps.h"
#include "bpf/unwind_table.h"
#include "symbols/dwarf/compact_unwind_table.h"
#include "symbols/dwarf/unwind_table_cache.h"
#include "userspace/capture/row_ranges.h"
#include "userspace/model/forked_children.h"
#include "userspace/model/recording.h"

namespace bpfprof {

class ElfFile;

// The table of the ELF file at `path`: from the table builder's cache, else as `miss` says
// (in the recorder, UnwindTableCache::get).
using UnwindTableProvider =
    std::function<CachedUnwindTableResult(const std::string& path, OnCacheMiss miss)>;

// Which files' tables are built when the cache has none.
enum class TableBuilds {
  kEveryMappedFile,
  // Only those a stack needs (prefer()): a whole machine maps hundreds of files whose code
  // never runs while it is recorded (-a: 21 of 145 files built appeared in any stack), and
  // building them cost the recording a tenth of a CPU.
  kWhenAStackNeedsThem,
};

// The in-kernel unwinder's maps, as the bookkeeping writes them.
class UnwindMapsSink {
 public:
  virtual ~UnwindMapsSink() = default;
  virtual uint32_t row_capacity() const = 0;  // rows there is room for now
  virtual uint32_t row_bound() const = 0;     // the most grow_rows() can make room for
  // Room for more rows (a chunk, bpf/unwind_maps.h); false at the bound or short of memory.
  virtual bool grow_rows() = 0;
  // Rows [first, first + rows.size()) of the global row array; pages the same.
  virtual void write_rows(uint32_t first, const std::vector<bpfprof_unwind_entry>& rows) = 0;
  virtual void write_pages(uint32_t first, const std::vector<bpfprof_unwind_page>& pages) = 0;
  // Rule `index` of the shared rule array (below BPFPROF_UNWIND_RULE_CAPACITY).
  virtual void write_rule(uint32_t index, const bpfprof_unwind_rule& rule) = 0;
  // False when the map of processes is full.
  virtual bool write_process(Pid pid, const bpfprof_process_mappings& mappings) = 0;
  // When the BPF side wrote the process's current entry (a young image's, from its VMAs);
  // nullopt if userspace wrote it or there is none.
  virtual std::optional<MonotonicNs> kernel_written_at(Pid pid) = 0;
  virtual void remove_process(Pid pid) = 0;
  // A loaded file's table by the name its VMAs give it, for pcs in no mapping of their
  // process's entry (bpf/unwind_maps.h); false when the map is full.
  virtual bool write_file(const bpfprof_file_key& key, const bpfprof_file_table& table) = 0;
  virtual void remove_file(const bpfprof_file_key& key) = 0;
};

class KernelUnwindTables {
 public:
  // `track_all`: every process is sampled (-a); else only those the events introduce (the
  // command, -p targets, children: the side band reports every process's mappings).
  // `workers`: threads building tables at once (the provider is called from each).
  KernelUnwindTables(UnwindMapsSink& sink, UnwindTableProvider provider, bool track_all,
                     unsigned workers = 1, TableBuilds builds = TableBuilds::kEveryMappedFile);
  ~KernelUnwindTables();
  KernelUnwindTables(const KernelUnwindTables&) = delete;
  KernelUnwindTables& operator=(const KernelUnwindTables&) = delete;

  // Takes the lifecycle events from index `from` on (their files resolved by MappedFiles):
  // mappings, execs, forks and exits; queues the tables of files not seen before.
  void apply(const std::vector<LifecycleEvent>& events, size_t from);
  // Loads the tables built since the last call and writes the processes that changed.
  // `mappings_read_until`: every mapping change before it has been applied (the side band was
  // read after it); an entry the BPF side wrote later is newer than ours and stays a while.
  void flush(MonotonicNs mappings_read_until);
  // Tables of files that a process about to start will map (`record -- CMD`: its program and
  // libraries), queued before it runs so that its first mappings find them loaded.
  void preload(const std::vector<std::string>& paths);
  // A stack of `pid` fell back to a copy: the queued tables of the files holding its `pcs`
  // are built before the others (each file once), so that on a cold cache the tables of what
  // runs come before those of what a whole machine's idle processes map; those left unbuilt
  // (TableBuilds::kWhenAStackNeedsThem) are queued first.
  void prefer(Pid pid, const std::vector<uint64_t>& pcs);
  // Blocks until every queued table is built (then flush() loads them), for at most `limit`;
  // true if every table was built by then.
  bool wait_for_tables(std::chrono::milliseconds limit);
  // Tables are queued or being built: their processes' samples fall back meanwhile.
  bool building();
  // Until a new process's mappings and tables are in the kernel its samples fall back to
  // stack copies: true while tables are being built and for a while after a tracked process
  // started, exec'd or was found (-p, -a), so that the recorder reads the side band sooner.
  // A dynamic loader maps a program's libraries within milliseconds of its exec.
  bool settling(MonotonicNs now);
  static constexpr uint64_t kSettlingNs = 50'000'000;
  // A V8 process (node) maps its builtins' copy and its first JIT code after it has set up its
  // heap: 30 ms after its exec on an idle machine, 300 ms on a busy one. Until they are in its
  // entry its JavaScript's stacks fall back.
  static constexpr uint64_t kV8SettlingNs = 1'000'000'000;
  const KernelUnwindStats& stats() const { return stats_; }

 private:
  enum class TableStatus : uint8_t {
    kQueued,
    kUnbuilt,  // not in the cache, and built only once a stack needs it (prefer())
    kLoaded,
    kNoRows,
    kUnavailable,
    kOverCapacity
  };
  struct FileTable {
    TableStatus status = TableStatus::kQueued;
    uint32_t first_row = 0;
    uint32_t row_count = 0;
    uint32_t first_page = 0;
    uint32_t page_count = 0;
    uint32_t page_base = 0;                   // CompactUnwindTable::page_base
    std::shared_ptr<const ElfFile> elf;       // its load segments give each mapping's bias
    std::optional<bpfprof_file_key> vma_key;  // written to the kernel's file map
    bool v8 = false;          // a process that maps it runs V8 (BPFPROF_PROCESS_JIT_FRAME_POINTERS)
    MonotonicNs last_mapped;  // the latest time a tracked process was seen to map it
  };
  struct Mapping {
    uint64_t start = 0;
    uint64_t end = 0;
    uint64_t file_offset = 0;
    std::string file;   // key into files_; empty for anonymous or special memory
    MappedFile mapped;  // where to read the file, held open while a job or mapping needs it
    bool anonymous = false;
    MonotonicNs mapped_at;  // the side band's time of it
  };
  struct Process {
    std::map<uint64_t, Mapping> mappings;
    // Its last exec: mappings older than it are the old image's. The side band's rings (one per
    // CPU) are read one after another, so an exec can come a read later than its first mmaps.
    MonotonicNs image_reset;
    bool tracked = false;
    MonotonicNs last_change;  // an untracked one is forgotten a while after it
    MonotonicNs image_start;  // its start, exec or discovery (settling())
  };
  struct BuildJob {
    std::string file;
    MappedFile mapped;
    OnCacheMiss miss = OnCacheMiss::kBuild;
  };
  struct BuildResult {
    std::string file;
    MappedFile mapped;  // its path as the mapping names it
    CachedUnwindTableResult table;
    std::shared_ptr<const ElfFile> elf{};
    std::optional<bpfprof_file_key> vma_key{};  // the file's device and inode, as the kernel's
    bool v8 = false;                            // symbols/dwarf/v8_builtins.h
    // The table's compact form (made on the worker thread); nullopt for more rules than it
    // indexes.
    std::optional<CompactUnwindTable> compact{};
  };

  void inherit_mappings(Pid parent_pid, Pid child_pid, MonotonicNs fork_time);
  void add_mapping(MonotonicNs time, Pid pid, const MappingInfo& info);
  void insert_mapping(MonotonicNs time, Pid pid, const Mapping& mapping);
  void track(Pid pid, MonotonicNs time);
  void queue_table(const Mapping& mapping);
  void queue_table(const std::string& file, const MappedFile& mapped);
  void move_ahead(const std::string& file, const MappedFile& mapped);
  bool queue_unbuilt_first(const std::string& file, const MappedFile& mapped);
  void forget_untracked(MonotonicNs now);
  void load(BuildResult& result);
  bool place(FileTable& file, const CompactUnwindTable& table);
  std::optional<std::vector<bpfprof_unwind_entry>> with_shared_rules(
      const CompactUnwindTable& table);
  std::optional<uint32_t> allocate(RowRanges& ranges, uint64_t count, bool rows);
  std::vector<std::string> unmapped_tables_least_recent_first() const;
  void evict(const std::string& file);
  void note_unmapped(const Process& process, MonotonicNs time);
  void write_file_entry(FileTable& file, const std::optional<bpfprof_file_key>& key);
  bool write_process(Pid pid, MonotonicNs mappings_read_until);
  bpfprof_exec_mapping describe(const Mapping& mapping) const;
  uint32_t process_flags(const Process& process) const;
  void build_tables();  // each worker thread

  UnwindMapsSink& sink_;
  UnwindTableProvider provider_;
  KernelUnwindStats stats_;
  RowRanges rows_;
  RowRanges pages_;
  // The shared rule array's rules (as bytes) and their indices: rules are never dropped (a
  // whole machine's tables have a few thousand).
  std::unordered_map<std::string, uint32_t> rule_indices_;
  std::unordered_map<std::string, FileTable> files_;
  std::unordered_map<Pid, Process> processes_;
  ForkedChildren forks_;             // the children that inherited their parent's mappings
  std::set<std::string> preferred_;  // files moved ahead in the queue by prefer()
  const bool track_all_;
  const TableBuilds builds_;
  MonotonicNs latest_;                            // the time of the latest event applied
  std::optional<MonotonicNs> last_new_image_;     // a tracked process's start or exec
  std::optional<MonotonicNs> last_new_v8_image_;  // of a process that runs V8: kV8SettlingNs
  std::set<Pid> changed_;
  // Since when each process's entry has been left to the kernel's rewrites (write_process).
  static constexpr uint64_t kMaxDeferralNs = 100'000'000;
  std::unordered_map<Pid, MonotonicNs> deferred_since_;
  // The entries written at the last flush, looked at again at the next (flush): the BPF side
  // may have scanned a process's VMAs from a lookup made before our write and stored its
  // entry (file mappings only, no JIT code) over ours just after it.
  std::vector<Pid> written_last_flush_;
  std::set<Pid> over_mapping_limit_;
  uint32_t last_generation_ = 0;  // of the last process entry written (bpfprof_process_mappings)

  std::mutex mutex_;  // guards jobs_, results_, pending_, stopping_
  std::condition_variable wake_worker_;
  std::condition_variable job_done_;
  std::deque<BuildJob> jobs_;
  std::vector<BuildResult> results_;
  size_t pending_ = 0;  // jobs queued or being built
  bool stopping_ = false;
  std::vector<std::thread> workers_;
};

// The file key of a mapping: its build-id (the same library reported by MMAP2 and by a /proc
// snapshot), else its mount namespace and path. Empty for memory that is no file.
std::string unwind_file_key(const MappingInfo& mapping);

}  // namespace bpfprof
