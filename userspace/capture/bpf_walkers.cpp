// The stack walker programs: each loaded from a walker object of its own (bpf/profiler.bpf.c
// built with BPFPROF_WALKER_OBJECT), on a thread of its own, with the main object's maps; their
// CO-RE relocations, and the main object's, against a minimal BTF made once (core_btf.h), their
// tp_btf programs through bpfprof's section handler.
#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <future>
#include <mutex>
#include <span>
#include <stdexcept>
#include <string>
#include <system_error>
#include <tuple>
#include <unordered_map>

#include "profiler.skel.h"
#include "symbols/dwarf/unwind_table_cache.h"
#include "userspace/capture/bpf_map_sizes.h"
#include "userspace/capture/bpf_programs.h"
#include "userspace/capture/core_btf.h"
#include "userspace/capture/core_btf_cache.h"
#include "userspace/capture/lite_walker_elf.h"
#include "userspace/model/clocks.h"
#include "walker.skel.h"

namespace bpfprof {
namespace {

constexpr const char* kTpBtfSection = "bpfprof_tp_btf/";

// The kernel's attach ids of the walker object's tp_btf programs, by tracepoint: written
// before any walker object loads, read by the section handler as they load (on their threads).
std::unordered_map<std::string, uint32_t>& tp_btf_ids() {
  static std::unordered_map<std::string, uint32_t> ids;
  return ids;
}

// Loads a "bpfprof_tp_btf/NAME" program as libbpf loads a "tp_btf/NAME" one, with the attach
// id found beforehand. Registered as a raw tracepoint, which libbpf loads without the
// kernel's BTF; made a tracing program here, just before its load.
int prepare_tp_btf_load(bpf_program* program, bpf_prog_load_opts* opts, long /*cookie*/) {
  const std::string tracepoint =
      std::string(bpf_program__section_name(program)).substr(std::strlen(kTpBtfSection));
  const auto found = tp_btf_ids().find(tracepoint);
  if (found == tp_btf_ids().end() || found->second == 0) return -ESRCH;
  if (int err = bpf_program__set_type(program, BPF_PROG_TYPE_TRACING)) return err;
  opts->expected_attach_type = BPF_TRACE_RAW_TP;
  opts->attach_btf_id = found->second;
  opts->attach_btf_obj_fd = 0;  // vmlinux
  return 0;
}

int attach_tp_btf(const bpf_program* program, long /*cookie*/, bpf_link** link) {
  *link = bpf_program__attach_trace(program);
  return *link ? 0 : -errno;
}

void register_tp_btf_handler() {
  static std::once_flag registered;
  std::call_once(registered, [] {
    LIBBPF_OPTS(libbpf_prog_handler_opts, opts, .prog_prepare_load_fn = prepare_tp_btf_load,
                .prog_attach_fn = attach_tp_btf);
    if (libbpf_register_prog_handler(kTpBtfSection, BPF_PROG_TYPE_RAW_TRACEPOINT, BPF_TRACE_RAW_TP,
                                     &opts) < 0)
      throw std::runtime_error("cannot register the tp_btf section handler: " + errno_text(errno));
  });
}

// A walker object's global data (read-only settings, counters) are the main object's maps:
// their layouts must be one, variable by variable.
std::vector<std::tuple<std::string, uint32_t, uint32_t>> global_variables(const bpf_object* obj) {
  std::vector<std::tuple<std::string, uint32_t, uint32_t>> variables;
  const btf* types = bpf_object__btf(obj);
  for (uint32_t id = 1; types && id < btf__type_cnt(types); ++id) {
    const btf_type* t = btf__type_by_id(types, id);
    if (!btf_is_datasec(t)) continue;
    const std::string section = btf__name_by_offset(types, t->name_off);
    if (!section.starts_with(".rodata") && !section.starts_with(".bss") &&
        !section.starts_with(".data"))
      continue;  // maps and kernel functions: matched by name
    const btf_var_secinfo* info = btf_var_secinfos(t);
    for (uint16_t i = 0; i < btf_vlen(t); ++i) {
      const btf_type* var = btf__type_by_id(types, info[i].type);
      variables.emplace_back(section + ":" + btf__name_by_offset(types, var->name_off),
                             info[i].offset, info[i].size);
    }
  }
  return variables;
}

// The main object's map that `map` of a walker object shares: the same name, or for global
// data the same section (their names begin with their objects' names).
const bpf_map* shared_map(const bpf_object* main, const bpf_map* map) {
  const std::string name = bpf_map__name(map);
  if (!bpf_map__is_internal(map)) return bpf_object__find_map_by_name(main, name.c_str());
  const std::string section = name.substr(name.find('.'));
  const bpf_map* found;
  bpf_object__for_each_map(found, main) {
    const std::string candidate = bpf_map__name(found);
    if (bpf_map__is_internal(found) && candidate.ends_with(section) &&
        bpf_map__value_size(found) == bpf_map__value_size(map))
      return found;
  }
  return nullptr;
}

// The objects' bytes: the main one, the walker and the lite walker.
std::vector<std::span<const uint8_t>> object_elves() {
  size_t main_size = 0, walker_size = 0;
  const void* main_elf = profiler_bpf__elf_bytes(&main_size);
  const void* walker_elf = walker_bpf__elf_bytes(&walker_size);
  return {{static_cast<const uint8_t*>(main_elf), main_size},
          {static_cast<const uint8_t*>(walker_elf), walker_size},
          lite_walker_elf()};
}

constexpr const char* kWalkerTracepoints[] = {"sched_switch", "sched_waking", "sys_exit"};

// The minimal BTF for the objects' relocations and the walkers' tracepoints' attach ids, from
// the kernel's BTF, which is parsed for them.
CoreBtf make_core_btf() {
  std::unique_ptr<btf, decltype(&btf__free)> kernel(btf__load_vmlinux_btf(), &btf__free);
  if (!kernel) throw std::runtime_error("cannot read the kernel's BTF: " + errno_text(errno));
  CoreBtf core;
  for (const char* tracepoint : kWalkerTracepoints)
    core.tracepoint_ids.push_back(tracepoint_btf_id(*kernel, tracepoint));
  const std::vector<std::span<const uint8_t>> elves = object_elves();
  core.btf = minimal_core_btf(*kernel, {elves[0], elves[1], elves[2]});
  return core;
}

}  // namespace

// The minimal BTF for the objects' relocations, in a memory file for libbpf to read by path;
// the attach ids of the walkers' tracepoints noted. From the cache when this boot has made
// them for these objects (core_btf_cache.h), else made and stored.
UniqueFd BpfPrograms::prepare_core_btf() {
  register_tp_btf_handler();
  const std::vector<std::span<const uint8_t>> elves = object_elves();
  const CoreBtfCache cache(UnwindTableCache::default_directory(),
                           bpf_objects_key({elves[0], elves[1], elves[2]}));
  std::optional<CoreBtf> core = cache.read(std::size(kWalkerTracepoints));
  if (!core) {
    core = make_core_btf();
    cache.store(*core);
  }
  for (size_t i = 0; i < std::size(kWalkerTracepoints); ++i)
    tp_btf_ids()[kWalkerTracepoints[i]] = core->tracepoint_ids[i];
  UniqueFd fd(memfd_create("bpfprof-core-btf", MFD_CLOEXEC));
  if (!fd) throw std::runtime_error("cannot make a memory file: " + errno_text(errno));
  if (::write(fd.get(), core->btf.data(), core->btf.size()) !=
      static_cast<ssize_t>(core->btf.size()))
    throw std::runtime_error("cannot write the minimal BTF: " + errno_text(errno));
  return fd;
}

// The programs that hold the stack walker (sample, sched_switch, sched_waking with wakers,
// the page faults and the address-space calls with --memory, the allocator's calls with
// --allocations), by name.
std::vector<const char*> BpfPrograms::walker_programs(const Config& config) {
  std::vector<const char*> programs = {"on_sample", "on_switch"};
  if (config.record_wakers) programs.push_back("on_waking");
  if (config.record_memory && !config.allocation_period) programs.push_back("on_page_fault");
  if (config.allocation_period) programs.push_back("on_allocator_call");
  if (config.record_memory) programs.push_back("on_address_space_exit");
  return programs;
}

// A walker object of `build` for `program` alone, its maps the main object's.
BpfPrograms::WalkerSkeleton BpfPrograms::open_walker(const char* program, WalkerBuild build,
                                                     const std::string& btf_path) const {
  LIBBPF_OPTS(bpf_object_open_opts, opts, .btf_custom_path = btf_path.c_str());
  // The lite object has the full one's programs, maps and global data: the full skeleton
  // describes both.
  WalkerSkeleton skel(static_cast<walker_bpf*>(calloc(1, sizeof(walker_bpf))));
  if (!skel || walker_bpf__create_skeleton(skel.get()))
    throw std::runtime_error("cannot open the BPF programs: " + errno_text(errno));
  if (build == WalkerBuild::kWithoutRuntimeReaders) {
    const std::span<const uint8_t> lite = lite_walker_elf();
    skel->skeleton->data = const_cast<uint8_t*>(lite.data());
    skel->skeleton->data_sz = lite.size();
  }
  if (bpf_object__open_skeleton(skel->skeleton, &opts))
    throw std::runtime_error("cannot open the BPF programs: " + errno_text(errno));
  if (global_variables(skel->obj) != global_variables(skeleton_->obj))
    throw std::runtime_error(
        "the walker object's global data are laid out unlike the main object's (a build fault)");
  const bpf_program* mine = bpf_object__find_program_by_name(skel->obj, program);
  bpf_program* each;
  bpf_object__for_each_program(each, skel->obj) { bpf_program__set_autoload(each, each == mine); }
  bpf_map* map;
  bpf_object__for_each_map(map, skel->obj) {
    const bpf_map* shared = shared_map(skeleton_->obj, map);
    if (!shared || bpf_map__reuse_fd(map, bpf_map__fd(shared)))
      throw std::runtime_error(std::string("cannot share the BPF map ") + bpf_map__name(map) +
                               ": " + errno_text(errno));
  }
  return skel;
}

// The walker programs are most of the verifier's time, and in one object their times add up:
// so each is loaded from an object of its own, on a thread of its own, with the main object's
// maps (its global data included, so its read-only values are those the verifier sees).
// Start-up then waits for them all at once, CPUs permitting. Each one's time into `times`.
std::vector<BpfPrograms::WalkerSkeleton> BpfPrograms::load_walkers(
    const Config& config, WalkerBuild build, const std::string& btf_path,
    std::vector<std::pair<std::string, double>>& times) const {
  const std::vector<const char*> programs = walker_programs(config);
  const size_t count = programs.size();
  std::vector<WalkerSkeleton> skeletons;
  for (const char* program : programs) skeletons.push_back(open_walker(program, build, btf_path));
  std::vector<int> errors(count, -EAGAIN);
  std::vector<double> load_ms(count, 0);
  {
    // A thread for each even beyond the CPUs: on 2 CPUs, three loads sharing them end
    // together (walkers 108-118 ms, sampling 168-183 ms after the invocation) where two
    // threads leave the third load alone at the end (134-151 ms, 192-214 ms).
    std::atomic<size_t> next{0};
    auto load_next = [&] {
      for (size_t i; (i = next++) < count;) {
        const MonotonicNs begun = monotonic_now();
        errors[i] = walker_bpf__load(skeletons[i].get());
        load_ms[i] = ms_between(begun, monotonic_now());
      }
    };
    std::vector<std::future<void>> loads;
    for (size_t l = 0; l < count; ++l) {
      try {
        loads.push_back(std::async(std::launch::async, load_next));
      } catch (const std::system_error&) {
        // No thread to be had: the others take its share, or the loads are retried below.
      }
    }
    for (std::future<void>& load : loads) load.get();
  }
  // What failed at once is tried again alone, in a fresh object: several loads at once may
  // not fit under a small `ulimit -v` where one does (and then the error is a single load's).
  for (size_t i = 0; i < count; ++i) {
    if (!errors[i]) continue;
    skeletons[i] = open_walker(programs[i], build, btf_path);
    if (int err = walker_bpf__load(skeletons[i].get()))
      throw std::runtime_error(
          load_failure(err, config.ring_buffer_bytes, config.unwind_row_capacity));
  }
  for (size_t i = 0; i < count; ++i) times.emplace_back(programs[i], load_ms[i]);
  return skeletons;
}

// The walkers without the runtimes' readers first where Config::runtime_readers_later says so,
// the full ones then loading on a thread of their own (take_full_walkers).
void BpfPrograms::load_walker_programs(const Config& config, UniqueFd core_btf) {
  const MonotonicNs started = monotonic_now();
  const std::string btf_path = "/proc/self/fd/" + std::to_string(core_btf.get());
  bool later = config.runtime_readers_later;
  walker_skeletons_ =
      load_walkers(config, later ? WalkerBuild::kWithoutRuntimeReaders : WalkerBuild::kFull,
                   btf_path, load_times_.walker_ms);
  load_times_.walkers_ms = ms_between(started, monotonic_now());
  fill_walker_slots(walker_skeletons_);
  if (later) {
    core_btf_ = std::move(core_btf);  // read by the loads
    try {
      full_walkers_ = std::async(std::launch::async, [this, config, btf_path] {
        std::vector<std::pair<std::string, double>> times;
        return load_walkers(config, WalkerBuild::kFull, btf_path, times);
      });
    } catch (const std::system_error&) {
      later = false;  // no thread: loaded here, their times in place of the lite ones'
      load_times_.walker_ms.clear();
      walker_skeletons_ = load_walkers(config, WalkerBuild::kFull, btf_path, load_times_.walker_ms);
      fill_walker_slots(walker_skeletons_);
    }
  }
  runtime_readers_in_ = !later;
  walkers_started_ = started;
  for (const WalkerSkeleton& walker : walker_skeletons_) {
    if (bpf_program__autoload(walker->progs.on_page_fault))
      page_fault_program_ = walker->progs.on_page_fault;
    if (bpf_program__autoload(walker->progs.on_allocator_call))
      allocator_call_program_ = walker->progs.on_allocator_call;
    if (bpf_program__autoload(walker->progs.on_address_space_exit))
      address_space_exit_program_ = walker->progs.on_address_space_exit;
  }
}

// The programs the dispatchers tail-call (bpf/profiler.bpf.c), from `walkers`.
void BpfPrograms::fill_walker_slots(const std::vector<WalkerSkeleton>& walkers) {
  for (const WalkerSkeleton& walker : walkers) {
    const std::pair<bpf_program*, bpf_map*> slots[] = {
        {walker->progs.on_sample, skeleton_->maps.sample_walker},
        {walker->progs.on_switch, skeleton_->maps.switch_walker},
        {walker->progs.on_waking, skeleton_->maps.waking_walker}};
    for (const auto& [program, slot] : slots) {
      if (!bpf_program__autoload(program)) continue;
      const uint32_t key = 0;
      const int fd = bpf_program__fd(program);
      if (bpf_map__update_elem(slot, &key, sizeof(key), &fd, sizeof(fd), BPF_ANY))
        throw std::runtime_error(std::string("cannot put the walker ") +
                                 bpf_program__name(program) + " in its slot: " + errno_text(errno));
    }
  }
}

bool BpfPrograms::take_full_walkers(bool wait) {
  if (runtime_readers_in_ || !full_walkers_.valid()) return runtime_readers_in_;
  if (!wait && full_walkers_.wait_for(std::chrono::seconds(0)) != std::future_status::ready)
    return false;
  try {
    std::vector<WalkerSkeleton> full = full_walkers_.get();
    fill_walker_slots(full);
    walker_skeletons_ = std::move(full);  // the lite ones unloaded, out of their slots now
    runtime_readers_in_ = true;
    load_times_.full_walkers_ms = ms_between(walkers_started_, monotonic_now());
  } catch (const std::exception& error) {
    fprintf(stderr,
            "bpfprof: warning: the runtimes' frame readers did not load (%s): stacks "
            "go on without their frames\n",
            error.what());
  }
  core_btf_.reset();
  return runtime_readers_in_;
}

void BpfPrograms::WalkerSkeletonDeleter::operator()(walker_bpf* skel) const {
  walker_bpf__destroy(skel);
}

}  // namespace bpfprof
