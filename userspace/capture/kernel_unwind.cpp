#include "userspace/capture/kernel_unwind.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <utility>

#include "symbols/dwarf/v8_builtins.h"
#include "symbols/elf/elf_file.h"
#include "symbols/relative_address.h"
#include "symbols/util/held_file.h"
#include "symbols/util/mapping_kind.h"
#include "symbols/util/mapping_ranges.h"
#include "symbols/util/text.h"
#include "symbols/util/unique_handle.h"
#include "symbols/util/untrusted_file.h"
#include "userspace/capture/file_key.h"

namespace bpfprof {

std::string unwind_file_key(const MappingInfo& mapping) {
  const MappingKind kind = classify_mapping(mapping.path);
  // The vdso is the same image in every process (clock_gettime: where timing loops sample).
  if (kind == MappingKind::kVdso) return vdso_image_path().empty() ? "" : "vdso";
  if (kind != MappingKind::kFile) return {};
  // A build-id names one table for every file that claims it only where root alone wrote the
  // file; a user's file gets a table of its own (it may claim libc's build-id).
  if (mapping.held_file && !written_by_us_or_root_only(mapping.held_file->fd()))
    return "held " + mapping.held_file->path();
  if (!mapping.build_id.empty()) return "build-id " + hex_string(mapping.build_id);
  return "path " + std::to_string(mapping.mount_namespace) + ":" + mapping.path;
}

namespace {

// p_vaddr - p_offset of the file's executable segments, if they all agree.
std::optional<uint64_t> executable_vaddr_minus_offset(const ElfFile& elf) {
  std::optional<uint64_t> delta;
  for (const LoadSegment& segment : elf.load_segments()) {
    if (!segment.executable()) continue;
    const uint64_t here = segment.vaddr - segment.file_offset;
    if (delta && *delta != here) return std::nullopt;
    delta = here;
  }
  return delta;
}

}  // namespace

KernelUnwindTables::KernelUnwindTables(UnwindMapsSink& sink, UnwindTableProvider provider,
                                       bool track_all, unsigned workers, TableBuilds builds)
    : sink_(sink),
      provider_(std::move(provider)),
      rows_(sink.row_capacity()),
      pages_(BPFPROF_UNWIND_PAGE_CAPACITY),
      track_all_(track_all),
      builds_(builds) {
  stats_.row_capacity = sink_.row_capacity();
  stats_.row_bound = sink_.row_bound();
  for (unsigned i = 0; i < std::max(workers, 1u); ++i)
    workers_.emplace_back([this] { build_tables(); });
}

KernelUnwindTables::~KernelUnwindTables() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_worker_.notify_all();
  for (std::thread& worker : workers_) worker.join();
}

void KernelUnwindTables::apply(const std::vector<LifecycleEvent>& events, size_t from) {
  for (size_t i = from; i < events.size(); ++i) {
    const LifecyclePayload& payload = events[i].payload;
    latest_ = std::max(latest_, events[i].time);
    if (const auto* mmap = std::get_if<MmapEvent>(&payload)) {
      add_mapping(events[i].time, mmap->pid, mmap->mapping);
    } else if (const auto* reset = std::get_if<AddressSpaceResetEvent>(&payload)) {
      Process& process = processes_[reset->pid];
      note_unmapped(process, events[i].time);
      // Exec: the old image's mappings go; the new image's follow (or came first).
      process.image_reset = std::max(process.image_reset, events[i].time);
      std::erase_if(process.mappings,
                    [&](const auto& m) { return m.second.mapped_at < process.image_reset; });
      forks_.forget(reset->pid);
      process.last_change = events[i].time;
      process.image_start = events[i].time;
      if (process.tracked) changed_.insert(reset->pid);
      if (process.tracked) last_new_image_ = events[i].time;
    } else if (const auto* fork = std::get_if<ForkEvent>(&payload)) {
      // Forks come from BPF, for tracked parents only. A new thread shares the mappings.
      if (fork->child_pid == fork->parent_pid) continue;
      inherit_mappings(fork->parent_pid, fork->child_pid, events[i].time);
      track(fork->child_pid, events[i].time);
    } else if (const std::optional<Pid> known = process_made_known_by(payload)) {
      track(*known, events[i].time);  // an exec, a start, an attach
    } else if (const auto* exit = std::get_if<ExitEvent>(&payload)) {
      if (!exit->group_dead) continue;
      if (auto process = processes_.find(exit->pid); process != processes_.end())
        note_unmapped(process->second, events[i].time);
      processes_.erase(exit->pid);
      forks_.forget_parent(exit->pid);
      changed_.erase(exit->pid);
      sink_.remove_process(exit->pid);
    }
  }
}

// What the parent mapped before the fork is the child's. The child's own mappings, from the
// side band (another ring, read first), are newer and stay on top; after its exec, read first
// too, it runs another image and inherits nothing.
void KernelUnwindTables::inherit_mappings(Pid parent_pid, Pid child_pid, MonotonicNs fork_time) {
  Process& child = processes_[child_pid];
  const auto parent = processes_.find(parent_pid);
  if (parent == processes_.end() || child.image_reset > fork_time) return;
  std::map<uint64_t, Mapping> own = std::move(child.mappings);
  child.mappings.clear();
  for (const auto& [start, mapping] : parent->second.mappings)
    if (mapping.mapped_at < fork_time) child.mappings.emplace(start, mapping);
  for (const auto& [start, mapping] : own) insert_replacing_overlaps(child.mappings, mapping);
  forks_.forked(parent_pid, child_pid, fork_time);
}

void KernelUnwindTables::add_mapping(MonotonicNs time, Pid pid, const MappingInfo& info) {
  Mapping mapping{info.start,
                  info.start + info.length,
                  info.file_offset,
                  unwind_file_key(info),
                  info.file(),
                  classify_mapping(info.path) == MappingKind::kAnonymousCode,
                  time};
  insert_mapping(time, pid, mapping);
  // Made before a fork that was read first: the children have it too.
  for (Pid child : forks_.forked_after(pid, time)) insert_mapping(time, child, mapping);
}

void KernelUnwindTables::insert_mapping(MonotonicNs time, Pid pid, const Mapping& mapping) {
  Process& process = processes_[pid];
  if (time < process.image_reset) return;  // the old image's, read after its exec
  insert_replacing_overlaps(process.mappings, mapping);
  process.last_change = time;
  if (!process.tracked && track_all_) process.tracked = true;
  if (!process.tracked) return;
  changed_.insert(pid);
  queue_table(mapping);
  if (auto file = files_.find(mapping.file); file != files_.end())
    file->second.last_mapped = std::max(file->second.last_mapped, time);
}

// A process whose samples the kernel takes: its mappings go to the kernel, its files' tables
// are built. It is new at `time` (started, exec'd or found): see settling().
void KernelUnwindTables::track(Pid pid, MonotonicNs time) {
  last_new_image_ = time;
  Process& process = processes_[pid];
  process.image_start = time;
  changed_.insert(pid);
  if (process.tracked) return;
  process.tracked = true;
  for (const auto& [start, mapping] : process.mappings) queue_table(mapping);
}

void KernelUnwindTables::queue_table(const Mapping& mapping) {
  queue_table(mapping.file, mapping.mapped);
}

void KernelUnwindTables::queue_table(const std::string& file, const MappedFile& mapped) {
  if (file.empty() || files_.contains(file)) return;
  files_.emplace(file, FileTable{});
  const OnCacheMiss miss =
      builds_ == TableBuilds::kEveryMappedFile ? OnCacheMiss::kBuild : OnCacheMiss::kReport;
  {
    std::lock_guard lock(mutex_);
    jobs_.push_back(BuildJob{file, mapped, miss});
    ++pending_;
  }
  wake_worker_.notify_one();
}

// A file left unbuilt that a stack needs: its table is built before the queued ones. The
// caller holds mutex_. False for a file in any other state.
bool KernelUnwindTables::queue_unbuilt_first(const std::string& file, const MappedFile& mapped) {
  const auto table = files_.find(file);
  if (table == files_.end() || table->second.status != TableStatus::kUnbuilt) return false;
  table->second.status = TableStatus::kQueued;
  --stats_.tables_unbuilt;
  jobs_.push_front(BuildJob{file, mapped, OnCacheMiss::kBuild});
  ++pending_;
  return true;
}

// Keyed as their mappings will be: by build-id, else by path in bpfprof's mount namespace
// (the command's). The vDSO too: every process maps it.
void KernelUnwindTables::preload(const std::vector<std::string>& paths) {
  std::vector<std::string> all = paths;
  all.push_back("[vdso]");
  for (const std::string& path : all) {
    MappingInfo info;
    info.path = path;
    if (classify_mapping(path) == MappingKind::kFile) {
      // Only its build-id is read (pread): no copy of a file a user could change.
      const UniqueFd fd =
          open_untrusted(path, UntrustedKind::kBinary, std::nullopt, Copying::kNever).fd;
      // A file another user could have written is keyed by the mapping that holds it
      // (unwind_file_key): its table is built when it is mapped, not once more here.
      if (!fd.valid() || !written_by_us_or_root_only(fd.get())) continue;
      const std::vector<uint8_t> build_id = read_elf_build_id(fd.get());
      info.build_id.assign(build_id.begin(), build_id.end());
    }
    queue_table(unwind_file_key(info), info.file());
  }
}

// The side band reports the mappings of every process on the machine; those of a process
// that is not tracked are kept a while (its fork event, from another ring, may come a batch
// later), then forgotten.
void KernelUnwindTables::forget_untracked(MonotonicNs now) {
  constexpr uint64_t kGraceNs = 2'000'000'000;
  std::erase_if(processes_, [&](const auto& entry) {
    const Process& p = entry.second;
    return !p.tracked && now.value > p.last_change.value + kGraceNs;
  });
  std::erase_if(deferred_since_,
                [&](const auto& entry) { return !processes_.contains(entry.first); });
}

void KernelUnwindTables::build_tables() {
  std::unique_lock lock(mutex_);
  while (true) {
    wake_worker_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
    if (stopping_) return;
    BuildJob job = std::move(jobs_.front());
    jobs_.pop_front();
    lock.unlock();
    const std::string& path = job.mapped.readable_path();
    BuildResult result{job.file, job.mapped, provider_(path, job.miss)};
    const auto* error = std::get_if<UnwindTableError>(&result.table);
    // The file's layout alone (its symbol table was half of this worker's time for a whole
    // machine's files); whether it is V8's, from a scan of its symbols' names.
    if (!error || *error != UnwindTableError::kNotInCache) {
      result.elf = ElfFile::open(path, nullptr, ElfContents::kLayout);
      if (classify_mapping(job.mapped.path) == MappingKind::kFile)
        result.vma_key = file_key_of(path);
    }
    if (result.elf) {
      const UniqueFd fd = open_untrusted(path, UntrustedKind::kBinary).fd;
      result.v8 = fd && is_v8_binary(fd.get());
    }
    // Compact from the cache (made when the table was built); a provider's rows otherwise.
    if (auto* table = std::get_if<CachedUnwindTable>(&result.table))
      result.compact = table->compact ? std::exchange(table->compact, std::nullopt)
                                      : compact_unwind_table(table->rows);
    lock.lock();
    results_.push_back(std::move(result));
    --pending_;
    job_done_.notify_all();
  }
}

void KernelUnwindTables::prefer(Pid pid, const std::vector<uint64_t>& pcs) {
  const auto process = processes_.find(pid);
  if (process == processes_.end()) return;
  const std::map<uint64_t, Mapping>& mappings = process->second.mappings;
  std::vector<const Mapping*> wanted;  // innermost first
  for (uint64_t pc : pcs) {
    auto it = mappings.upper_bound(pc);
    if (it == mappings.begin() || pc >= (--it)->second.end || it->second.file.empty()) continue;
    const auto file = files_.find(it->second.file);
    if (file == files_.end() || (file->second.status != TableStatus::kQueued &&
                                 file->second.status != TableStatus::kUnbuilt))
      continue;
    if (preferred_.insert(it->second.file).second) wanted.push_back(&it->second);
  }
  if (wanted.empty()) return;
  {
    std::lock_guard lock(mutex_);
    for (auto mapping = wanted.rbegin(); mapping != wanted.rend(); ++mapping)
      move_ahead((*mapping)->file, (*mapping)->mapped);
  }
  wake_worker_.notify_all();
}

// The file's job first in the queue (the caller holds mutex_). One being looked up in the
// cache alone is built when that comes back (load()).
void KernelUnwindTables::move_ahead(const std::string& file, const MappedFile& mapped) {
  if (queue_unbuilt_first(file, mapped)) {
    ++stats_.tables_preferred;
    return;
  }
  const auto job =
      std::find_if(jobs_.begin(), jobs_.end(), [&](const BuildJob& j) { return j.file == file; });
  if (job == jobs_.end()) return;  // being built
  BuildJob moved = std::move(*job);
  moved.miss = OnCacheMiss::kBuild;
  jobs_.erase(job);
  jobs_.push_front(std::move(moved));
  ++stats_.tables_preferred;
}

bool KernelUnwindTables::wait_for_tables(std::chrono::milliseconds limit) {
  std::unique_lock lock(mutex_);
  return job_done_.wait_for(lock, limit, [this] { return pending_ == 0; });
}

bool KernelUnwindTables::building() {
  std::lock_guard lock(mutex_);
  return pending_ > 0 || !results_.empty();
}

bool KernelUnwindTables::settling(MonotonicNs now) {
  if (last_new_image_ && now.value < last_new_image_->value + kSettlingNs) return true;
  if (last_new_v8_image_ && now.value < last_new_v8_image_->value + kV8SettlingNs) return true;
  return building();
}

void KernelUnwindTables::flush(MonotonicNs mappings_read_until) {
  std::vector<BuildResult> results;
  {
    std::lock_guard lock(mutex_);
    results.swap(results_);
  }
  for (BuildResult& result : results) load(result);
  for (Pid pid : written_last_flush_)
    if (processes_.contains(pid) && sink_.kernel_written_at(pid)) {
      changed_.insert(pid);
      ++stats_.entries_overwritten_by_kernel;
    }
  written_last_flush_.clear();
  std::erase_if(changed_, [&](Pid pid) { return write_process(pid, mappings_read_until); });
  forget_untracked(latest_);
}

// Appends a built table to the row array (once per file, shared by every process mapping
// it) and marks the processes that map the file for rewriting.
void KernelUnwindTables::load(BuildResult& result) {
  FileTable& file = files_[result.file];
  const auto* table = std::get_if<CachedUnwindTable>(&result.table);
  const auto* error = std::get_if<UnwindTableError>(&result.table);
  if (error && *error == UnwindTableError::kNotInCache) {
    file.status = TableStatus::kUnbuilt;
    ++stats_.tables_unbuilt;
    // A stack needed it while it was being looked up.
    if (preferred_.contains(result.file)) {
      {
        std::lock_guard lock(mutex_);
        queue_unbuilt_first(result.file, result.mapped);
      }
      wake_worker_.notify_one();
    }
    return;
  }
  if (error && (*error == UnwindTableError::kTooManyRows || *error == UnwindTableError::kTooSlow)) {
    file.status = TableStatus::kUnavailable;
    ++(*error == UnwindTableError::kTooManyRows ? stats_.tables_past_row_limit
                                                : stats_.tables_past_time_limit);
    constexpr size_t kSkippedFilesNamed = 5;
    if (stats_.tables_skipped_files.size() < kSkippedFilesNamed)
      stats_.tables_skipped_files.push_back(result.mapped.path);
  } else if (!table || !result.elf) {
    file.status = TableStatus::kUnavailable;
    ++stats_.tables_failed;
  } else {
    stats_.table_ms += std::chrono::duration<double, std::milli>(table->time).count();
    ++(table->from_cache() ? stats_.tables_from_cache : stats_.tables_built);
    file.elf = std::move(result.elf);
    file.v8 = result.v8;
    // The compact form is taken out of the table (build_tables).
    if (result.compact ? result.compact->rows.empty() : !table->has_rows()) {
      file.status = TableStatus::kNoRows;
    } else if (result.compact && place(file, *result.compact)) {
      file.status = TableStatus::kLoaded;
      write_file_entry(file, result.vma_key);
    } else {
      file.status = TableStatus::kOverCapacity;
      ++stats_.files_over_capacity;
    }
  }
  for (const auto& [pid, process] : processes_)
    for (const auto& [start, mapping] : process.mappings)
      if (process.tracked && mapping.file == result.file) {
        changed_.insert(pid);
        break;
      }
}

// Several keys (paths in other namespaces, a build-id and a path) can name one file: the
// kernel's entry points at the rows of the last one loaded, which are as good.
void KernelUnwindTables::write_file_entry(FileTable& file,
                                          const std::optional<bpfprof_file_key>& key) {
  const std::optional<uint64_t> delta = executable_vaddr_minus_offset(*file.elf);
  if (!key || !delta) return;
  if (sink_.write_file(
          *key, bpfprof_file_table{file.first_page, file.page_count, *delta, file.page_base, 0}))
    file.vma_key = key;
}

// Writes a table's rows and pages where there is room (evicting tables no process maps if
// there is none), its rules into the shared array; false if it does not fit, or it spans more
// code than a quarter of the page array.
bool KernelUnwindTables::place(FileTable& file, const CompactUnwindTable& table) {
  // A file's CFI can spread a few rows over 4 GiB of addresses: a page each 64 KiB.
  constexpr size_t kMostPages = BPFPROF_UNWIND_PAGE_CAPACITY / 4;  // 1 GiB of code
  if (table.pages.size() > kMostPages) return false;
  std::optional<std::vector<bpfprof_unwind_entry>> rows = with_shared_rules(table);
  if (!rows) return false;
  const std::optional<uint32_t> first_row = allocate(rows_, rows->size(), true);
  if (!first_row) return false;
  const std::optional<uint32_t> first_page = allocate(pages_, table.pages.size(), false);
  if (!first_page) {
    rows_.release(*first_row, static_cast<uint32_t>(rows->size()));
    return false;
  }
  std::vector<bpfprof_unwind_page> pages = table.pages;
  for (bpfprof_unwind_page& page : pages) page.first_row += *first_row;
  sink_.write_rows(*first_row, *rows);
  sink_.write_pages(*first_page, pages);
  file.first_row = *first_row;
  file.row_count = static_cast<uint32_t>(rows->size());
  file.first_page = *first_page;
  file.page_count = static_cast<uint32_t>(pages.size());
  file.page_base = table.page_base;
  stats_.rows_loaded = rows_.in_use();
  stats_.rules_loaded = rule_indices_.size();
  return true;
}

// The table's rows with their rules' indices in the shared rule array, the rules not in it
// yet written there; nullopt when the array is full.
std::optional<std::vector<bpfprof_unwind_entry>> KernelUnwindTables::with_shared_rules(
    const CompactUnwindTable& table) {
  std::vector<uint16_t> shared(table.rules.size());
  for (size_t i = 0; i < table.rules.size(); ++i) {
    const std::string key(reinterpret_cast<const char*>(&table.rules[i]), sizeof(UnwindRule));
    auto found = rule_indices_.find(key);
    if (found == rule_indices_.end()) {
      if (rule_indices_.size() >= BPFPROF_UNWIND_RULE_CAPACITY) return std::nullopt;
      const auto index = static_cast<uint32_t>(rule_indices_.size());
      sink_.write_rule(index, table.rules[i]);
      found = rule_indices_.emplace(key, index).first;
    }
    shared[i] = static_cast<uint16_t>(found->second);
  }
  std::vector<bpfprof_unwind_entry> rows = table.rows;
  for (bpfprof_unwind_entry& row : rows) row.rule = shared[row.rule];
  return rows;
}

// `count` rows (`rows`) or pages: the row array grows up to its bound first; then the tables
// of files no process maps give way, the least recently mapped first, until they fit.
std::optional<uint32_t> KernelUnwindTables::allocate(RowRanges& ranges, uint64_t count, bool rows) {
  if (count > (rows ? sink_.row_bound() : BPFPROF_UNWIND_PAGE_CAPACITY)) return std::nullopt;
  const auto n = static_cast<uint32_t>(count);
  while (true) {
    if (std::optional<uint32_t> first = ranges.allocate(n)) return first;
    if (!rows || !sink_.grow_rows()) break;
    rows_.grow(sink_.row_capacity());
    stats_.row_capacity = sink_.row_capacity();
  }
  for (const std::string& file : unmapped_tables_least_recent_first()) {
    evict(file);
    if (std::optional<uint32_t> first = ranges.allocate(n)) return first;
  }
  return std::nullopt;
}

// The loaded tables of files that no process maps now, the least recently mapped first.
std::vector<std::string> KernelUnwindTables::unmapped_tables_least_recent_first() const {
  std::set<std::string> mapped;
  for (const auto& [pid, process] : processes_)
    for (const auto& [start, mapping] : process.mappings) mapped.insert(mapping.file);
  std::vector<std::pair<MonotonicNs, std::string>> unmapped;
  for (const auto& [file, table] : files_)
    if (table.status == TableStatus::kLoaded && !mapped.contains(file))
      unmapped.emplace_back(table.last_mapped, file);
  std::sort(unmapped.begin(), unmapped.end());
  std::vector<std::string> files;
  for (auto& entry : unmapped) files.push_back(std::move(entry.second));
  return files;
}

// Drops a file's table (and what else is kept of it); its rows and pages are reused. No walk
// can reach them: only a process's mapping array points at rows, and none maps the file. A
// file mapped again later is loaded again (from the table builder's cache).
void KernelUnwindTables::evict(const std::string& file) {
  const auto it = files_.find(file);
  if (it == files_.end()) return;
  const FileTable& table = it->second;
  if (table.vma_key) sink_.remove_file(*table.vma_key);
  rows_.release(table.first_row, table.row_count);
  pages_.release(table.first_page, table.page_count);
  ++stats_.tables_evicted;
  files_.erase(it);
  stats_.rows_loaded = rows_.in_use();
}

// A process's mappings go (an exec, an exit): their files were mapped until `time`.
void KernelUnwindTables::note_unmapped(const Process& process, MonotonicNs time) {
  for (const auto& [start, mapping] : process.mappings) {
    const auto file = files_.find(mapping.file);
    if (file != files_.end()) file->second.last_mapped = std::max(file->second.last_mapped, time);
  }
}

// How the walker steps through a frame in `mapping`.
bpfprof_exec_mapping KernelUnwindTables::describe(const Mapping& mapping) const {
  bpfprof_exec_mapping out{};
  out.start = mapping.start;
  out.end = mapping.end;
  out.kind = mapping.anonymous ? BPFPROF_MAPPING_FRAME_POINTERS : BPFPROF_MAPPING_FALLBACK;
  auto file = files_.find(mapping.file);
  if (file == files_.end()) return out;
  const FileTable& table = file->second;
  // Like libdwfl, code in a file without call-frame information is walked with frame
  // pointers.
  if (table.status == TableStatus::kNoRows) out.kind = BPFPROF_MAPPING_FRAME_POINTERS;
  if (table.status != TableStatus::kLoaded) return out;
  MapEntry entry;
  entry.start = mapping.start;
  entry.end = mapping.end;
  entry.file_offset = mapping.file_offset;
  const std::optional<uint64_t> relative = relative_address(mapping.start, entry, *table.elf);
  if (!relative) return out;  // no loaded segment there: nothing to look up
  out.bias = mapping.start - vaddr_for_relative(*relative, *table.elf);
  out.first_page = table.first_page;
  out.page_count = table.page_count;
  out.page_base = table.page_base;
  out.kind = BPFPROF_MAPPING_TABLE;
  return out;
}

// A process that maps a V8 file has its JIT code walked by frame pointers also before its
// anonymous mappings reach its entry (bpf/unwind_maps.h).
uint32_t KernelUnwindTables::process_flags(const Process& process) const {
  for (const auto& [start, mapping] : process.mappings) {
    auto file = files_.find(mapping.file);
    if (file != files_.end() && file->second.v8) return BPFPROF_PROCESS_JIT_FRAME_POINTERS;
  }
  return 0;
}

// True when done; false when the entry in the kernel is newer than what we know: the BPF side
// rewrites a young image's entry from its VMAs at its exec and at each mmap, and one written
// after the side band was read has the libraries that ld.so mapped since. Replacing it with
// ours (without them) left a 20 ms process's stacks through them to stack copies. (An mmap
// between the look-up and the write is lost from the kernel's entry until our next write.)
bool KernelUnwindTables::write_process(Pid pid, MonotonicNs mappings_read_until) {
  auto process = processes_.find(pid);
  if (process == processes_.end() || !process->second.tracked) return true;
  if (std::optional<MonotonicNs> written = sink_.kernel_written_at(pid);
      written && written->value >= mappings_read_until.value) {
    // A process that keeps taking its mmap lock (a JIT's heap and code space: munmap, mprotect)
    // has the kernel rewrite its entry more often than the side band is read. Deferred to it
    // for good, its entry would never hold its anonymous code (node: 90% of its stacks fell
    // back, "pc in no known mapping"): ours goes in after kMaxDeferralNs.
    const auto deferred = deferred_since_.try_emplace(pid, mappings_read_until).first;
    if (mappings_read_until.value - deferred->second.value < kMaxDeferralNs) return false;
  }
  deferred_since_.erase(pid);
  auto value = std::make_unique<bpfprof_process_mappings>();
  memset(value.get(), 0, sizeof(*value));
  for (const auto& [start, mapping] : process->second.mappings) {
    // [vsyscall] (/proc's maps list it at 0xffffffffff600000): no user pc is there, and the
    // walker's branch-free search takes starts below 2^63: probing it sent pcs in the highest
    // mappings (the vDSO, ld.so) to its entry, and a -p'd node's Date.now() stacks to copies.
    if (start >> 63) break;
    if (value->count == BPFPROF_MAX_PROCESS_MAPPINGS) {
      // The lowest mappings are kept; a pc above them falls back to a stack copy.
      if (over_mapping_limit_.insert(pid).second) ++stats_.processes_over_mapping_limit;
      break;
    }
    value->mappings[value->count++] = describe(mapping);
  }
  value->flags = process_flags(process->second);
  if (value->flags != 0 &&
      (!last_new_v8_image_ || last_new_v8_image_->value < process->second.image_start.value))
    last_new_v8_image_ = process->second.image_start;
  // Never 0 (an empty cache entry) nor with the top bit (the BPF side's own entries).
  last_generation_ = last_generation_ % 0x7fffffffu + 1;
  value->generation = last_generation_;
  if (sink_.write_process(pid, *value))
    written_last_flush_.push_back(pid);
  else
    ++stats_.processes_not_stored;
  return true;
}

}  // namespace bpfprof
