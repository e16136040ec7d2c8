#include "userspace/capture/bpf_programs.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <poll.h>
#include <sys/mman.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>
#include <future>
#include <numeric>
#include <optional>
#include <set>
#include <stdexcept>
#include <system_error>

#include "bpf/events.h"
#include "bpf/unwind_maps.h"
#include "profiler.skel.h"
#include "symbols/util/unique_handle.h"
#include "userspace/capture/event_log.h"
#include "userspace/capture/memory_limit.h"

namespace bpfprof {

namespace {

std::string errno_text(int err) { return strerror(err < 0 ? -err : err); }

// Chunks of the row array (bpf/unwind_maps.h) that hold `rows` rows.
uint32_t row_chunks(uint32_t rows) {
  return (rows + BPFPROF_UNWIND_CHUNK_ROWS - 1) / BPFPROF_UNWIND_CHUNK_ROWS;
}
constexpr uint64_t kRowChunkBytes =
    uint64_t{BPFPROF_UNWIND_CHUNK_ROWS} * sizeof(bpfprof_unwind_entry);

// Why loading failed, with what to do about it. Out of memory is the maps' size against a
// memory limit (a cgroup's limit is charged for BPF maps), not a missing privilege.
std::string load_failure(int err, uint64_t ring_buffer_bytes, uint32_t unwind_rows,
                         const std::string& room = {}) {
  if (err == -ENOMEM || err == ENOMEM) {
    const uint64_t table_mb = uint64_t{unwind_rows} * sizeof(bpfprof_unwind_entry) >> 20;
    return "cannot load the BPF programs: out of memory for their maps (ring buffer " +
           std::to_string(ring_buffer_bytes >> 20) + " MB, unwind tables " +
           std::to_string(table_mb) + " MB) under this process's memory limit (cgroup" + room +
           "); try a smaller --buffer-size, or --call-graph dwarf-copy (no unwind tables)";
  }
  return "cannot load the BPF programs (" + errno_text(err) +
         "); bpfprof needs root (CAP_BPF and CAP_PERFMON) and a kernel with BTF";
}

// What the kernel will charge for the object's maps, from their sizes before loading (as
// bpftool's memlock counts them). A preallocated hash map holds every element up front, each
// with a header of ~48 bytes, and a 16-byte bucket per entry rounded up to a power of two.
uint64_t map_bytes(const bpf_object* object, int cpus) {
  uint64_t total = 0;
  const bpf_map* map = nullptr;
  bpf_object__for_each_map(map, object) {
    const uint64_t entries = bpf_map__max_entries(map);
    const uint64_t value = (bpf_map__value_size(map) + 7) & ~uint64_t{7};
    const uint64_t key = (bpf_map__key_size(map) + 7) & ~uint64_t{7};
    switch (bpf_map__type(map)) {
      case BPF_MAP_TYPE_RINGBUF:
        total += entries;
        break;
      case BPF_MAP_TYPE_ARRAY:
        total += value * entries;
        break;
      case BPF_MAP_TYPE_PERCPU_ARRAY:
        total += value * entries * static_cast<uint64_t>(cpus);
        break;
      case BPF_MAP_TYPE_HASH:
      case BPF_MAP_TYPE_LRU_HASH:
        total += std::bit_ceil(entries) * 16;
        if (!(bpf_map__map_flags(map) & BPF_F_NO_PREALLOC)) total += (48 + key + value) * entries;
        break;
      default:
        break;  // allocated as used (task storage), or small
    }
  }
  return total;
}

// The recorder's own memory beside the maps while it records: the model, the unwinder's
// caches and the libraries' text it reads (~30 MB on a small recording).
constexpr uint64_t kRecorderWorkingBytes = 32ull << 20;

// Fails before loading when the maps cannot fit under a cgroup's limit with room left for the
// recorder. Loading anyway would let the maps take the last of it, and the next page the
// recorder touches would have it killed by the cgroup's OOM killer, with nothing said.
void check_memory_room(const bpf_object* object, int cpus, const BpfPrograms::Config& config) {
  const auto room = memory_cgroup_room();
  if (!room) return;
  const uint64_t needed = map_bytes(object, cpus) + kRecorderWorkingBytes +
                          row_chunks(config.unwind_initial_rows) * kRowChunkBytes;
  if (needed <= *room) return;
  throw std::runtime_error(
      load_failure(-ENOMEM, config.ring_buffer_bytes, config.unwind_initial_rows,
                   ": " + std::to_string(*room >> 20) + " MB left, " +
                       std::to_string(needed >> 20) + " MB needed with the recorder's own"));
}

// The unwinder's arrays sized for at most `rows` rows (none: a call graph without unwind
// tables; a slot each then, as a map needs one).
void size_unwind_maps(profiler_bpf* skel, uint32_t rows) {
  const std::pair<bpf_map*, uint32_t> sizes[] = {
      {skel->maps.unwind_rows, std::max<uint32_t>(row_chunks(rows), 1)},
      {skel->maps.unwind_pages, rows ? BPFPROF_UNWIND_PAGE_CAPACITY : 1},
      {skel->maps.unwind_rules, rows ? BPFPROF_UNWIND_RULE_CAPACITY : 1}};
  for (const auto& [map, entries] : sizes)
    if (int err = bpf_map__set_max_entries(map, entries))
      throw std::runtime_error(std::string("cannot size ") + bpf_map__name(map) + ": " +
                               errno_text(err));
}

}  // namespace

// An mmapable BPF array, written through a shared mapping of it: a file's pages or rows in
// one copy instead of one syscall each. `element` bytes a slot, one after the other (the row
// array's blocks hold rows without a gap between them).
class MappedArray {
 public:
  MappedArray(bpf_map* map, size_t element)
      : MappedArray(bpf_map__fd(map), bpf_map__name(map), bpf_map__value_size(map),
                    bpf_map__max_entries(map), element) {}
  // The array map `fd` of `entries` values of `value_size` bytes.
  MappedArray(int fd, const char* name, size_t value_size, size_t entries, size_t element)
      : element_(element) {
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    const size_t value = (value_size + 7) & ~size_t{7};
    capacity_ = entries * value / element;
    bytes_ = (entries * value + page - 1) / page * page;
    void* base = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (base == MAP_FAILED)
      throw std::system_error(errno, std::generic_category(), std::string("cannot map ") + name);
    base_ = static_cast<uint8_t*>(base);
  }
  ~MappedArray() { munmap(base_, bytes_); }
  MappedArray(const MappedArray&) = delete;
  MappedArray& operator=(const MappedArray&) = delete;

  // `count` values from `values` at slot `first`.
  template <typename T>
  void write(uint32_t first, const T* values, size_t count) {
    if (sizeof(T) != element_ || first + count > capacity_)
      throw std::out_of_range("a write past a BPF array's end");
    memcpy(base_ + size_t{first} * element_, values, count * sizeof(T));
  }
  template <typename T>
  void write(uint32_t first, const std::vector<T>& values) {
    write(first, values.data(), values.size());
  }
  uint32_t capacity() const { return static_cast<uint32_t>(capacity_); }
  size_t bytes() const { return bytes_; }

 private:
  size_t element_;
  size_t capacity_ = 0;
  size_t bytes_ = 0;
  uint8_t* base_ = nullptr;
};

// The row array: chunks of BPFPROF_UNWIND_CHUNK_ROWS rows, each an mmapable array map in
// the outer array of maps, added as tables need room, up to the outer array's size.
class RowChunks {
 public:
  RowChunks(bpf_map* outer, uint32_t initial_rows) : outer_(outer) {
    for (uint32_t i = 0; i < std::max<uint32_t>(row_chunks(initial_rows), 1); ++i)
      if (!grow())
        throw std::runtime_error("cannot make the unwind tables' first rows: " + errno_text(errno));
  }

  // One more chunk; false at the bound, or where the memory cgroup has no room for it and
  // the recorder's own (a map charged past the limit would have the recorder killed).
  bool grow() {
    if (chunks_.size() >= bpf_map__max_entries(outer_)) return false;
    if (const auto room = memory_cgroup_room();
        room && *room < kRowChunkBytes + kRecorderWorkingBytes)
      return false;
    LIBBPF_OPTS(bpf_map_create_opts, options, .map_flags = BPF_F_MMAPABLE);
    UniqueFd fd(bpf_map_create(BPF_MAP_TYPE_ARRAY, "unwind_row_chunk", sizeof(uint32_t),
                               sizeof(bpfprof_unwind_row_block), BPFPROF_UNWIND_CHUNK_BLOCKS,
                               &options));
    if (!fd) return false;
    std::unique_ptr<MappedArray> rows;
    try {
      rows = std::make_unique<MappedArray>(
          fd.get(), "unwind_row_chunk", sizeof(bpfprof_unwind_row_block),
          BPFPROF_UNWIND_CHUNK_BLOCKS, sizeof(bpfprof_unwind_entry));
    } catch (const std::system_error&) {
      return false;
    }
    const auto index = static_cast<uint32_t>(chunks_.size());
    const int inner = fd.get();
    if (bpf_map_update_elem(bpf_map__fd(outer_), &index, &inner, BPF_ANY)) return false;
    chunks_.push_back({std::move(fd), std::move(rows)});
    return true;
  }

  void write(uint32_t first, const std::vector<bpfprof_unwind_entry>& rows) {
    if (uint64_t{first} + rows.size() > capacity())
      throw std::out_of_range("a write past the unwind rows' end");
    size_t done = 0;
    while (done < rows.size()) {  // a table may go on in the next chunk
      const uint64_t row = uint64_t{first} + done;
      const auto in_chunk = static_cast<uint32_t>(row % BPFPROF_UNWIND_CHUNK_ROWS);
      const size_t count =
          std::min<size_t>(rows.size() - done, BPFPROF_UNWIND_CHUNK_ROWS - in_chunk);
      chunks_[row / BPFPROF_UNWIND_CHUNK_ROWS].rows->write(in_chunk, rows.data() + done, count);
      done += count;
    }
  }
  uint32_t capacity() const {
    return static_cast<uint32_t>(chunks_.size() * BPFPROF_UNWIND_CHUNK_ROWS);
  }
  uint32_t bound() const { return bpf_map__max_entries(outer_) * BPFPROF_UNWIND_CHUNK_ROWS; }
  size_t bytes() const { return chunks_.size() * kRowChunkBytes; }

 private:
  struct Chunk {
    UniqueFd fd;
    std::unique_ptr<MappedArray> rows;
  };
  bpf_map* outer_;
  std::vector<Chunk> chunks_;
};

// The unwinder's maps in the kernel.
class BpfUnwindMaps : public UnwindMapsSink {
 public:
  BpfUnwindMaps(bpf_map* rows, uint32_t initial_rows, bpf_map* pages, bpf_map* rules,
                bpf_map* processes, bpf_map* files)
      : rows_(rows, initial_rows),
        pages_(pages, sizeof(bpfprof_unwind_page)),
        rules_(rules),
        processes_(processes),
        files_(files) {
    rules_bytes_ = bpf_map__max_entries(rules) * ((bpf_map__value_size(rules) + 7) & ~size_t{7});
  }

  uint32_t row_capacity() const override { return rows_.capacity(); }
  uint32_t row_bound() const override { return rows_.bound(); }
  bool grow_rows() override { return rows_.grow(); }
  void write_rows(uint32_t first, const std::vector<bpfprof_unwind_entry>& rows) override {
    rows_.write(first, rows);
  }
  void write_pages(uint32_t first, const std::vector<bpfprof_unwind_page>& pages) override {
    pages_.write(first, pages);
  }
  void write_rule(uint32_t index, const bpfprof_unwind_rule& rule) override {
    bpf_map__update_elem(rules_, &index, sizeof(index), &rule, sizeof(rule), BPF_ANY);
  }
  bool write_process(Pid pid, const bpfprof_process_mappings& mappings) override {
    const uint32_t key = static_cast<uint32_t>(pid.value);
    if (bpf_map__update_elem(processes_, &key, sizeof(key), &mappings, sizeof(mappings), BPF_ANY))
      return false;
    stored_.insert(pid);
    return true;
  }
  std::optional<MonotonicNs> kernel_written_at(Pid pid) override {
    const uint32_t key = static_cast<uint32_t>(pid.value);
    if (bpf_map__lookup_elem(processes_, &key, sizeof(key), entry_.get(), sizeof(*entry_), 0) ||
        !(entry_->generation & BPFPROF_KERNEL_WRITTEN_GENERATION))
      return std::nullopt;
    return MonotonicNs{entry_->kernel_written_ns};
  }
  void remove_process(Pid pid) override {
    const uint32_t key = static_cast<uint32_t>(pid.value);
    bpf_map__delete_elem(processes_, &key, sizeof(key), 0);
    stored_.erase(pid);
  }
  bool write_file(const bpfprof_file_key& key, const bpfprof_file_table& table) override {
    return bpf_map__update_elem(files_, &key, sizeof(key), &table, sizeof(table), BPF_ANY) == 0;
  }
  void remove_file(const bpfprof_file_key& key) override {
    bpf_map__delete_elem(files_, &key, sizeof(key), 0);
  }
  // The row, page and rule arrays, and the largest number of process entries held at once.
  uint64_t bytes() const {
    peak_processes_ = std::max(peak_processes_, stored_.size());
    return rows_.bytes() + pages_.bytes() + rules_bytes_ +
           peak_processes_ * sizeof(bpfprof_process_mappings);
  }

 private:
  RowChunks rows_;
  MappedArray pages_;
  bpf_map* rules_;
  bpf_map* processes_;
  bpf_map* files_;
  size_t rules_bytes_ = 0;
  std::set<Pid> stored_;
  mutable size_t peak_processes_ = 0;
  // An entry read back (10 KB: not on the stack).
  std::unique_ptr<bpfprof_process_mappings> entry_ = std::make_unique<bpfprof_process_mappings>();
};

void BpfPrograms::SkeletonDeleter::operator()(profiler_bpf* skel) const {
  profiler_bpf__destroy(skel);
}
void BpfPrograms::LinkDeleter::operator()(bpf_link* link) const { bpf_link__destroy(link); }
void BpfPrograms::RingBufferDeleter::operator()(ring_buffer* rb) const { ring_buffer__free(rb); }

BpfPrograms::BpfPrograms(const Config& config)
    : user_stack_copy_bytes_(config.user_stack_copy_bytes) {
  libbpf_set_print([](enum libbpf_print_level level, const char* format, va_list args) -> int {
    if (level == LIBBPF_WARN && getenv("BPFPROF_DEBUG_BPF")) return vfprintf(stderr, format, args);
    return 0;
  });
  skeleton_.reset(profiler_bpf__open());
  if (!skeleton_) throw std::runtime_error("cannot open the BPF programs: " + errno_text(errno));
  set_read_only_data(skeleton_.get(), config);
  // The walker programs are each loaded from an object of their own (load_walker_programs);
  // sched_waking's only with wakers.
  for (bpf_program* walker :
       {skeleton_->progs.on_sample, skeleton_->progs.on_switch, skeleton_->progs.on_waking})
    bpf_program__set_autoload(walker, false);
  bpf_program__set_autoload(skeleton_->progs.on_mmap_lock, config.unwind_row_capacity != 0);
  if (int err = bpf_map__set_max_entries(skeleton_->maps.tracked_processes,
                                         std::max<uint32_t>(config.max_tracked_processes, 1)))
    throw std::runtime_error("cannot size the table of tracked processes: " + errno_text(err));
  if (int err = bpf_map__set_max_entries(skeleton_->maps.events, config.ring_buffer_bytes))
    throw std::runtime_error("cannot size the ring buffer to " +
                             std::to_string(config.ring_buffer_bytes) +
                             " bytes: " + errno_text(err));
  const int cpus = libbpf_num_possible_cpus();
  if (cpus <= 0) throw std::runtime_error("cannot count the possible CPUs: " + errno_text(-cpus));
  // Two slots a CPU: the sampling program's and the tracepoints' (bpf/maps.h).
  if (int err =
          bpf_map__set_max_entries(skeleton_->maps.copy_scratch, 2 * static_cast<uint32_t>(cpus)))
    throw std::runtime_error("cannot size the stack-copy space: " + errno_text(err));
  if (int err = bpf_map__set_max_entries(
          skeleton_->maps.row_cache, static_cast<uint32_t>(cpus) * BPFPROF_ROW_CACHE_CPU_ENTRIES))
    throw std::runtime_error("cannot size the unwinder's row cache: " + errno_text(err));
  size_unwind_maps(skeleton_.get(), config.unwind_row_capacity);
  check_memory_room(skeleton_->obj, cpus, config);
  if (int err = profiler_bpf__load(skeleton_.get()))
    throw std::runtime_error(
        load_failure(err, config.ring_buffer_bytes, config.unwind_row_capacity));
  load_walker_programs(config);
  if (config.unwind_row_capacity)
    unwind_maps_ = std::make_unique<BpfUnwindMaps>(
        skeleton_->maps.unwind_rows, config.unwind_initial_rows, skeleton_->maps.unwind_pages,
        skeleton_->maps.unwind_rules, skeleton_->maps.unwind_processes,
        skeleton_->maps.unwind_files);
  // libbpf reads its rings in the order they were added: forks and execs first, so that a
  // new process's mappings are known before its samples are unwound.
  ring_buffer_.reset(ring_buffer__new(bpf_map__fd(skeleton_->maps.lifecycle_events),
                                      &BpfPrograms::on_event, this, nullptr));
  if (!ring_buffer_)
    throw std::system_error(errno, std::generic_category(),
                            "cannot set up the BPF lifecycle ring buffer");
  if (int err = ring_buffer__add(ring_buffer_.get(), bpf_map__fd(skeleton_->maps.events),
                                 &BpfPrograms::on_event, this))
    throw std::system_error(err < 0 ? -err : err, std::generic_category(),
                            "cannot set up the BPF ring buffer");
  lifecycle_ring_.reset(ring_buffer__new(bpf_map__fd(skeleton_->maps.lifecycle_events),
                                         &BpfPrograms::on_event, this, nullptr));
  if (!lifecycle_ring_)
    throw std::system_error(errno, std::generic_category(),
                            "cannot set up the BPF lifecycle ring buffer");
}

BpfPrograms::~BpfPrograms() = default;

// The programs that hold the stack walker (sample, sched_switch, and sched_waking with
// wakers), as they are in `skel`.
std::vector<bpf_program*> BpfPrograms::walker_programs(profiler_bpf* skel, const Config& config) {
  std::vector<bpf_program*> programs = {skel->progs.on_sample, skel->progs.on_switch};
  if (config.record_wakers) programs.push_back(skel->progs.on_waking);
  return programs;
}

void BpfPrograms::set_read_only_data(profiler_bpf* skel, const Config& config) {
  skel->rodata->track_all = config.track_all_processes ? 1 : 0;
  skel->rodata->record_off_cpu = config.record_off_cpu ? 1 : 0;
  skel->rodata->off_cpu_stack_interval_ns = config.sampling_interval_ns;
  skel->rodata->record_wakers = config.record_wakers ? 1 : 0;
  skel->rodata->user_stack_copy_bytes = config.user_stack_copy_bytes;
  skel->rodata->fallback_copies_whole_stack = config.fallback_copies_whole_stack ? 1 : 0;
  skel->rodata->kernel_unwind = config.unwind_row_capacity ? 1 : 0;
  skel->rodata->wakeup_threshold = config.ring_buffer_bytes / 4;
  skel->rodata->self_tgid = static_cast<uint32_t>(getpid());
}

BpfPrograms::Skeleton BpfPrograms::open_walker(size_t index, const Config& config) const {
  Skeleton skel(profiler_bpf__open());
  if (!skel) throw std::runtime_error("cannot open the BPF programs: " + errno_text(errno));
  set_read_only_data(skel.get(), config);
  bpf_program* mine = walker_programs(skel.get(), config).at(index);
  bpf_program* program;
  bpf_object__for_each_program(program, skel->obj) {
    bpf_program__set_autoload(program, program == mine);
  }
  bpf_map* map;
  bpf_object__for_each_map(map, skel->obj) {
    const bpf_map* shared = bpf_object__find_map_by_name(skeleton_->obj, bpf_map__name(map));
    if (!shared || bpf_map__reuse_fd(map, bpf_map__fd(shared)))
      throw std::runtime_error(std::string("cannot share the BPF map ") + bpf_map__name(map) +
                               ": " + errno_text(errno));
  }
  return skel;
}

// Each walker program takes the verifier 100-150 ms here (the rest of the object ~30 ms), one
// after the other in one object: so each is loaded from an object of its own, on a thread of
// its own, with the main object's maps (its global data included, so its read-only values are
// those the verifier sees). On 2 CPUs this took start-up from ~550 to ~350 ms; with more CPUs
// it waits for the longest one alone.
void BpfPrograms::load_walker_programs(const Config& config) {
  const size_t count = walker_programs(skeleton_.get(), config).size();
  std::vector<Skeleton> skeletons;
  for (size_t i = 0; i < count; ++i) skeletons.push_back(open_walker(i, config));
  std::vector<int> errors(count, -EAGAIN);
  {
    std::vector<std::future<int>> loads(count);
    for (size_t i = 0; i < count; ++i) {
      try {
        loads[i] = std::async(std::launch::async,
                              [skel = skeletons[i].get()] { return profiler_bpf__load(skel); });
      } catch (const std::system_error&) {
        // No thread to be had: loaded alone below.
      }
    }
    for (size_t i = 0; i < count; ++i)
      if (loads[i].valid()) errors[i] = loads[i].get();
  }
  // What failed at once is tried again alone, in a fresh object: several copies of the
  // kernel's BTF parsed at once may not fit under a small `ulimit -v` where one does (and
  // then the error is the one a single load gives).
  for (size_t i = 0; i < count; ++i) {
    if (!errors[i]) continue;
    skeletons[i] = open_walker(i, config);
    if (int err = profiler_bpf__load(skeletons[i].get()))
      throw std::runtime_error(
          load_failure(err, config.ring_buffer_bytes, config.unwind_row_capacity));
  }
  walker_skeletons_ = std::move(skeletons);
  sample_program_ = walker_skeletons_[0]->progs.on_sample;
}

void BpfPrograms::attach_lifecycle() {
  if (int err = profiler_bpf__attach(skeleton_.get()))
    throw std::runtime_error("cannot attach the process-lifecycle tracepoints: " + errno_text(err));
  // sched_switch and sched_waking (the sample program is attached to its perf events).
  for (const auto& skel : walker_skeletons_)
    if (int err = profiler_bpf__attach(skel.get()))
      throw std::runtime_error("cannot attach the scheduler tracepoints: " + errno_text(err));
}

void BpfPrograms::attach_sampling(const std::vector<UniqueFd>& perf_event_fds) {
  for (const UniqueFd& fd : perf_event_fds) {
    bpf_link* link = bpf_program__attach_perf_event(sample_program_, fd.get());
    if (!link)
      throw std::runtime_error("cannot attach the sample program to a perf event: " +
                               errno_text(errno));
    sample_links_.emplace_back(link);
  }
}

void BpfPrograms::detach_sampling() { sample_links_.clear(); }

void BpfPrograms::track_process(Pid pid, Tracked how) {
  uint32_t key = static_cast<uint32_t>(pid.value);
  uint8_t state =
      how == Tracked::kLaunchedBeforeExec ? BPFPROF_TRACKED_AWAITING_EXEC : BPFPROF_TRACKED;
  if (bpf_map__update_elem(skeleton_->maps.tracked_processes, &key, sizeof(key), &state,
                           sizeof(state), BPF_ANY))
    throw std::runtime_error("cannot track pid " + std::to_string(pid.value) + ": " +
                             errno_text(errno));
}

namespace {
// Returned by the event callback to make libbpf stop consuming (the event it was called for
// is consumed): a poll must come back to the recorder's loop (signals, deadline, side band)
// even when events arrive faster than they are processed.
constexpr int kPollBudgetSpent = -EAGAIN;
constexpr auto kPollBudget = std::chrono::milliseconds(100);
}  // namespace

void BpfPrograms::wait(int timeout_ms, const std::vector<int>& also) {
  // Events are submitted without waking the reader (see bpf/profiler.bpf.c): this returns at
  // the timeout, at a signal, or when the buffer is filling up.
  std::vector<pollfd> fds{pollfd{ring_buffer__epoll_fd(ring_buffer_.get()), POLLIN, 0}};
  for (int fd : also) fds.push_back(pollfd{fd, POLLIN, 0});
  ::poll(fds.data(), fds.size(), timeout_ms);
}

int BpfPrograms::consume(IngestPipeline& pipeline) {
  apply_runtime_changes(pipeline);  // interpreters found in the mappings taken just before
  target_ = &pipeline;
  poll_deadline_ = std::chrono::steady_clock::now() + kPollBudget;
  events_this_poll_ = 0;
  int n = ring_buffer__consume(ring_buffer_.get());
  poll_deadline_.reset();
  target_ = nullptr;
  apply_stack_copy_changes(pipeline);
  apply_runtime_changes(pipeline);
  ring_emptied_ = n != kPollBudgetSpent;
  return n == kPollBudgetSpent ? static_cast<int>(events_this_poll_) : n;
}

void BpfPrograms::read_lifecycle_ring() {
  if (target_) ring_buffer__consume(lifecycle_ring_.get());
}

int BpfPrograms::drain(IngestPipeline& pipeline) {
  target_ = &pipeline;
  int n = ring_buffer__consume(ring_buffer_.get());
  target_ = nullptr;
  return n;
}

void BpfPrograms::adapt_stack_copies(IngestPipeline& pipeline) {
  if (user_stack_copy_bytes_)
    pipeline.decoder().adapt_stack_copies(user_stack_copy_bytes_, BPFPROF_MAX_STACK_COPY);
}

void BpfPrograms::apply_stack_copy_changes(IngestPipeline& pipeline) {
  Recording& recording = pipeline.recording();
  for (auto [pid, bytes] : pipeline.decoder().take_stack_copy_changes()) {
    const uint32_t key = static_cast<uint32_t>(pid.value);
    if (bpf_map__update_elem(skeleton_->maps.stack_copy_bytes_by_process, &key, sizeof(key), &bytes,
                             sizeof(bytes), BPF_ANY) == 0 &&
        bytes > user_stack_copy_bytes_)
      recording.stats.raised_stack_copies[pid] = bytes;
  }
}

UnwindMapsSink* BpfPrograms::unwind_maps() { return unwind_maps_.get(); }

uint64_t BpfPrograms::unwind_map_bytes() const { return unwind_maps_ ? unwind_maps_->bytes() : 0; }

std::vector<uint64_t> BpfPrograms::unwind_fallbacks() const {
  std::vector<uint64_t> by_reason(BPFPROF_FALLBACK_REASONS);
  const int cpus = libbpf_num_possible_cpus();
  if (cpus <= 0 || !unwind_maps_) return by_reason;
  std::vector<uint64_t> per_cpu(static_cast<size_t>(cpus));
  for (uint32_t reason = 0; reason < BPFPROF_FALLBACK_REASONS; ++reason)
    if (bpf_map__lookup_elem(skeleton_->maps.unwind_fallbacks, &reason, sizeof(reason),
                             per_cpu.data(), per_cpu.size() * sizeof(uint64_t), 0) == 0)
      for (uint64_t n : per_cpu) by_reason[reason] += n;
  return by_reason;
}

namespace {

// The runtimes' per-process maps (runtimes/<name>/frames.bpf.h), by name, and their counts.
class SkeletonRuntimeMaps final : public RuntimeKernelMaps {
 public:
  explicit SkeletonRuntimeMaps(profiler_bpf* skeleton) : skeleton_(skeleton) {}

  bool put(const char* map, Pid pid, const void* value, size_t size) override {
    const uint32_t key = static_cast<uint32_t>(pid.value);
    bpf_map* found = bpf_object__find_map_by_name(skeleton_->obj, map);
    return found && bpf_map__update_elem(found, &key, sizeof(key), value, size, BPF_ANY) == 0;
  }
  void erase(const char* map, Pid pid) override {
    const uint32_t key = static_cast<uint32_t>(pid.value);
    if (bpf_map* found = bpf_object__find_map_by_name(skeleton_->obj, map))
      bpf_map__delete_elem(found, &key, sizeof(key), 0);
  }
  void set_process_count(RuntimeKind runtime, uint32_t count) override {
    const auto index = static_cast<size_t>(runtime);
    if (index < BPFPROF_RUNTIMES) skeleton_->bss->runtime_processes[index] = count;
  }

 private:
  profiler_bpf* skeleton_;
};

}  // namespace

bool BpfPrograms::runtime_processes_known() const {
  for (uint32_t count : skeleton_->bss->runtime_processes)
    if (count) return true;
  return false;
}

void BpfPrograms::apply_runtime_changes(IngestPipeline& pipeline) {
  SkeletonRuntimeMaps maps(skeleton_.get());
  pipeline.runtimes().apply_kernel_changes(maps, pipeline.recording());
}

std::vector<uint64_t> BpfPrograms::per_cpu_counts(const bpf_map* map) const {
  int ncpus = libbpf_num_possible_cpus();
  if (ncpus <= 0) return {};
  std::vector<uint64_t> per_cpu(static_cast<size_t>(ncpus));
  uint32_t zero = 0;
  if (bpf_map__lookup_elem(map, &zero, sizeof(zero), per_cpu.data(),
                           per_cpu.size() * sizeof(uint64_t), 0))
    return {};
  return per_cpu;
}

std::vector<uint64_t> BpfPrograms::lost_events_per_cpu() const {
  return per_cpu_counts(skeleton_->maps.lost_events);
}

uint64_t BpfPrograms::processes_not_followed() const {
  const std::vector<uint64_t> per_cpu = per_cpu_counts(skeleton_->maps.processes_not_followed);
  return std::accumulate(per_cpu.begin(), per_cpu.end(), uint64_t{0});
}

uint64_t BpfPrograms::lost_events() const {
  return __atomic_load_n(&skeleton_->bss->lost_events_total, __ATOMIC_RELAXED);
}

std::unordered_map<Pid, uint64_t> BpfPrograms::lost_events_by_process() const {
  std::unordered_map<Pid, uint64_t> result;
  const bpf_map* map = skeleton_->maps.lost_events_by_process;
  uint32_t key = 0;
  uint32_t next = 0;
  const void* previous = nullptr;
  while (bpf_map__get_next_key(map, previous, &next, sizeof(next)) == 0) {
    uint64_t value = 0;
    if (bpf_map__lookup_elem(map, &next, sizeof(next), &value, sizeof(value), 0) == 0)
      result[Pid{static_cast<int32_t>(next)}] = value;
    key = next;
    previous = &key;
  }
  return result;
}

int BpfPrograms::on_event(void* context, void* data, size_t size) {
  auto* self = static_cast<BpfPrograms*>(context);
  if (!self->target_) return 0;
  // Saved after it is taken: the mappings read for it (IngestPipeline::read_lifecycle_with)
  // go into the saved stream before it, as a replay must take them.
  self->target_->take_bpf_event(data, size);
  if (self->event_log_) self->event_log_->write_bpf_event(data, size);
  // Checking the clock every 256 events keeps its cost out of the per-event path.
  if (self->poll_deadline_ && ++self->events_this_poll_ % 256 == 0 &&
      std::chrono::steady_clock::now() > *self->poll_deadline_)
    return kPollBudgetSpent;
  return 0;
}

}  // namespace bpfprof
