#include "userspace/capture/bpf_programs.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <system_error>

#include "bpf/events.h"
#include "profiler.skel.h"
#include "userspace/capture/allocator_probe_sites.h"
#include "userspace/capture/bpf_map_sizes.h"
#include "userspace/capture/bpf_unwind_maps.h"
#include "userspace/model/clocks.h"
#include "walker.skel.h"

namespace bpfprof {

void BpfPrograms::SkeletonDeleter::operator()(profiler_bpf* skel) const {
  profiler_bpf__destroy(skel);
}
void BpfPrograms::LinkDeleter::operator()(bpf_link* link) const { bpf_link__destroy(link); }

BpfPrograms::BpfPrograms(const Config& config)
    : user_stack_copy_bytes_(config.user_stack_copy_bytes) {
  libbpf_set_print([](enum libbpf_print_level level, const char* format, va_list args) -> int {
    if (level == LIBBPF_WARN && getenv("BPFPROF_DEBUG_BPF")) return vfprintf(stderr, format, args);
    return 0;
  });
  MonotonicNs begun = monotonic_now();
  // Libbpf would look each relocated type up in the kernel's whole BTF (a scan of its names
  // per type: 25 ms for this object); in a minimal one instead. The object still parses the
  // kernel's BTF for its kernel-function calls and tp_btf programs.
  UniqueFd core_btf = prepare_core_btf();
  const std::string btf_path = "/proc/self/fd/" + std::to_string(core_btf.get());
  load_times_.core_btf_ms = ms_between(begun, monotonic_now());
  begun = monotonic_now();
  LIBBPF_OPTS(bpf_object_open_opts, open_options, .btf_custom_path = btf_path.c_str());
  skeleton_.reset(profiler_bpf__open_opts(&open_options));
  if (!skeleton_) throw std::runtime_error("cannot open the BPF programs: " + errno_text(errno));
  configure_main_object(config);
  check_memory_room(skeleton_->obj, libbpf_num_possible_cpus(), config);
  if (int err = profiler_bpf__load(skeleton_.get()))
    throw std::runtime_error(
        load_failure(err, config.ring_buffer_bytes, config.unwind_row_capacity));
  load_times_.main_object_ms = ms_between(begun, monotonic_now());
  load_walker_programs(config, std::move(core_btf));
  if (config.unwind_row_capacity)
    unwind_maps_ = std::make_unique<BpfUnwindMaps>(
        skeleton_->maps.unwind_rows, config.unwind_initial_rows, skeleton_->maps.unwind_pages,
        skeleton_->maps.unwind_rules, skeleton_->maps.unwind_processes,
        skeleton_->maps.unwind_files);
  lifecycle_ring_ = std::make_unique<RingReader>(bpf_map__fd(skeleton_->maps.lifecycle_events),
                                                 &BpfPrograms::on_event, this);
  events_ring_ = std::make_unique<RingReader>(bpf_map__fd(skeleton_->maps.events),
                                              &BpfPrograms::on_event, this);
}

BpfPrograms::~BpfPrograms() = default;

// Before the main object's load: its settings, which of its programs load, its maps' sizes.
void BpfPrograms::configure_main_object(const Config& config) {
  set_read_only_data(skeleton_.get(), config);
  // The walker programs are each loaded from an object of their own (load_walker_programs),
  // tail-called by the dispatchers; sched_waking's only with wakers, the page faults' and
  // address-space calls' only with --memory, the allocator's only with --allocations.
  bpf_program__set_autoload(skeleton_->progs.dispatch_waking, config.record_wakers);
  for (bpf_program* walker :
       {skeleton_->progs.on_sample, skeleton_->progs.on_switch, skeleton_->progs.on_waking,
        skeleton_->progs.on_page_fault, skeleton_->progs.on_allocator_call,
        skeleton_->progs.on_address_space_exit})
    bpf_program__set_autoload(walker, false);
  bpf_program__set_autoload(skeleton_->progs.on_address_space_entry, config.record_memory);
  bpf_program__set_autoload(skeleton_->progs.on_allocator_entry, config.allocation_period != 0);
  bpf_program__set_autoload(skeleton_->progs.on_mmap_lock, config.unwind_row_capacity != 0);
  bpf_program__set_autoload(skeleton_->progs.on_rss_stat, config.record_memory);
  size_feature_maps(skeleton_.get(), config);
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
}

void BpfPrograms::set_read_only_data(profiler_bpf* skel, const Config& config) {
  skel->rodata->track_all = config.track_all_processes ? 1 : 0;
  skel->rodata->cgroup_filter_count = config.cgroup_filters;
  skel->rodata->record_off_cpu = config.record_off_cpu ? 1 : 0;
  skel->rodata->off_cpu_stack_interval_ns = config.sampling_interval_ns;
  skel->rodata->record_wakers = config.record_wakers ? 1 : 0;
  skel->rodata->record_memory = config.record_memory ? 1 : 0;
  if (config.allocation_period) skel->rodata->allocation_period = config.allocation_period;
  // Quantiles of an exponential distribution of mean 1, in 1/1024ths: -ln(1 - (i + 0.5) / n).
  for (uint32_t i = 0; i < BPFPROF_ALLOCATION_QUANTILES; ++i)
    skel->rodata->allocation_quantiles[i] =
        static_cast<uint32_t>(-std::log(1.0 - (i + 0.5) / BPFPROF_ALLOCATION_QUANTILES) * 1024.0);
  skel->rodata->user_stack_copy_bytes = config.user_stack_copy_bytes;
  skel->rodata->fallback_copies_whole_stack = config.fallback_copies_whole_stack ? 1 : 0;
  skel->rodata->kernel_unwind = config.unwind_row_capacity ? 1 : 0;
  skel->rodata->wakeup_threshold = config.ring_buffer_bytes / 4;
  skel->rodata->self_tgid = static_cast<uint32_t>(getpid());
}

void BpfPrograms::attach_lifecycle() {
  // With them the walkers' dispatchers for sched_switch and sched_waking (the sample one is
  // attached to its perf events).
  if (int err = profiler_bpf__attach(skeleton_.get()))
    throw std::runtime_error("cannot attach the process-lifecycle tracepoints: " + errno_text(err));
  if (address_space_exit_program_) {  // --memory: sys_exit
    address_space_exit_link_.reset(bpf_program__attach(address_space_exit_program_));
    if (!address_space_exit_link_)
      throw std::runtime_error("cannot attach the walkers' tracepoints: " + errno_text(errno));
  }
}

void BpfPrograms::attach_sampling(const SamplingEvents& events) {
  auto attach = [&](bpf_program* program, const std::vector<UniqueFd>& fds, const char* what) {
    for (const UniqueFd& fd : fds) {
      bpf_link* link = program ? bpf_program__attach_perf_event(program, fd.get()) : nullptr;
      if (!link)
        throw std::runtime_error(std::string("cannot attach the ") + what +
                                 " program to a perf event: " + errno_text(errno));
      sample_links_.emplace_back(link);
    }
  };
  attach(skeleton_->progs.dispatch_sample, events.fds, "sample");
  attach(page_fault_program_, events.page_fault_fds, "page-fault");
}

// Each allocating function gets a probe at its entry (the countdown) and one at its return (the
// block), free one at its entry; each function once, however many names it has.
void BpfPrograms::attach_allocator_probes(const std::string& libc) {
  const std::vector<std::pair<std::string, uint64_t>> calls = {
      {"malloc", BPFPROF_ALLOCATOR_MALLOC},
      {"calloc", BPFPROF_ALLOCATOR_CALLOC},
      {"realloc", BPFPROF_ALLOCATOR_REALLOC},
      {"memalign", BPFPROF_ALLOCATOR_MEMALIGN},
      {"aligned_alloc", BPFPROF_ALLOCATOR_MEMALIGN},
      {"posix_memalign", BPFPROF_ALLOCATOR_POSIX_MEMALIGN},
      {"free", BPFPROF_ALLOCATOR_FREE}};
  std::vector<std::string> names;
  for (const auto& [name, call] : calls) names.push_back(name);
  const std::vector<std::string> present = functions_at_distinct_addresses(libc, names);
  for (const auto& [name, call] : calls) {
    if (std::find(present.begin(), present.end(), name) == present.end()) {
      if (call == BPFPROF_ALLOCATOR_MEMALIGN || call == BPFPROF_ALLOCATOR_POSIX_MEMALIGN) continue;
      throw std::runtime_error("cannot find " + name + " in " + libc);
    }
    if (call == BPFPROF_ALLOCATOR_FREE) {
      attach_allocator_probe(libc, name, call, allocator_call_program_, false);
    } else {
      attach_allocator_probe(libc, name, call, skeleton_->progs.on_allocator_entry, false);
      attach_allocator_probe(libc, name, call, allocator_call_program_, true);
    }
  }
}

void BpfPrograms::attach_allocator_probe(const std::string& libc, const std::string& function,
                                         uint64_t call, bpf_program* program, bool at_return) {
  LIBBPF_OPTS(bpf_uprobe_opts, options, .bpf_cookie = call, .retprobe = at_return,
              .func_name = function.c_str());
  const uint64_t offset =
      call == BPFPROF_ALLOCATOR_FREE ? probe_offset_past_null_check(libc, function) : 0;
  bpf_link* link =
      program ? bpf_program__attach_uprobe_opts(program, -1, libc.c_str(), offset, &options)
              : nullptr;
  if (!link)
    throw std::runtime_error("cannot probe " + function + " in " + libc + ": " + errno_text(errno));
  probe_links_.emplace_back(link);
}

void BpfPrograms::detach_sampling() { sample_links_.clear(); }

void BpfPrograms::release_buffers() {
  sample_links_.clear();
  probe_links_.clear();
  profiler_bpf__detach(skeleton_.get());
  address_space_exit_link_.reset();
  lifecycle_ring_.reset();
  events_ring_.reset();
  unwind_maps_.reset();
}

void BpfPrograms::set_cgroup_filters(const std::vector<bpfprof_cgroup_filter>& filters) {
  for (uint32_t i = 0; i < filters.size() && i < BPFPROF_MAX_CGROUP_FILTERS; ++i)
    if (bpf_map__update_elem(skeleton_->maps.cgroup_filters, &i, sizeof(i), &filters[i],
                             sizeof(filters[i]), BPF_ANY))
      throw std::runtime_error("cannot set the cgroup filters: " + errno_text(errno));
}

void BpfPrograms::track_process(Pid pid, Tracked how) {
  uint32_t key = static_cast<uint32_t>(pid.value);
  uint8_t state =
      how == Tracked::kLaunchedBeforeExec ? BPFPROF_TRACKED_AWAITING_EXEC : BPFPROF_TRACKED;
  if (bpf_map__update_elem(skeleton_->maps.tracked_processes, &key, sizeof(key), &state,
                           sizeof(state), BPF_ANY))
    throw std::runtime_error("cannot track pid " + std::to_string(pid.value) + ": " +
                             errno_text(errno));
}

}  // namespace bpfprof
