// The verifier's cost per BPF program, which bounds bpfprof's start-up: loads a profiler BPF
// object with the read-only values of the default `record` (kernel walk, off-CPU, wakers) and
// prints, per program, the instructions the verifier processed, its states and its time
// (the kernel's own BPF_LOG_STATS figures), median of ROUNDS loads. Any build's object can be
// given, so that two builds are compared in one run:
//   build/bench/verify_cost [OBJECT.bpf.o ...]     (root; default build/bpf/profiler.bpf.o)
#include <bpf/btf.h>
#include <bpf/libbpf.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace {

struct ObjectCloser {
  void operator()(bpf_object* object) const { bpf_object__close(object); }
};
using Object = std::unique_ptr<bpf_object, ObjectCloser>;

// Sets a `const volatile` global of .rodata by its name (BTF of the object's data section).
bool set_read_only(bpf_object* object, const char* name, uint64_t value) {
  bpf_map* rodata = nullptr;
  bpf_map* map;
  bpf_object__for_each_map(map, object) {
    if (strstr(bpf_map__name(map), ".rodata")) rodata = map;
  }
  const btf* types = bpf_object__btf(object);
  if (!rodata || !types) return false;
  size_t size = 0;
  // libbpf 1.1 returns it const; before the load it is the object's own writable copy.
  auto* data = static_cast<char*>(const_cast<void*>(bpf_map__initial_value(rodata, &size)));
  const int section = btf__find_by_name_kind(types, ".rodata", BTF_KIND_DATASEC);
  if (!data || section < 0) return false;
  const btf_type* type = btf__type_by_id(types, section);
  const btf_var_secinfo* var = btf_var_secinfos(type);
  for (int i = 0; i < btf_vlen(type); ++i, ++var) {
    const btf_type* t = btf__type_by_id(types, var->type);
    if (strcmp(btf__name_by_offset(types, t->name_off), name) != 0) continue;
    if (var->offset + var->size > size || var->size > sizeof(value)) return false;
    memcpy(data + var->offset, &value, var->size);  // little-endian: the low bytes
    return true;
  }
  return false;
}

// The number after `key` in a verifier log, or -1.
long log_number(const char* log, const char* key) {
  const char* at = strstr(log, key);
  return at ? strtol(at + strlen(key), nullptr, 10) : -1;
}

struct ProgramCost {
  long instructions = 0;
  long states = 0;
  std::vector<long> microseconds;
};

// One load of `path`; adds each program's figures to `costs`. False if it did not load.
bool load_once(const char* path, std::map<std::string, ProgramCost>& costs) {
  Object object(bpf_object__open(path));
  if (!object) return false;
  for (const char* flag :
       {"record_off_cpu", "record_wakers", "kernel_unwind", "fallback_copies_whole_stack"})
    set_read_only(object.get(), flag, 1);
  set_read_only(object.get(), "user_stack_copy_bytes", 8192);
  set_read_only(object.get(), "self_tgid", 1);
  std::vector<std::unique_ptr<char[]>> logs;
  bpf_program* program;
  bpf_object__for_each_program(program, object.get()) {
    constexpr size_t kLogBytes = 1 << 16;
    logs.emplace_back(new char[kLogBytes]());
    bpf_program__set_log_buf(program, logs.back().get(), kLogBytes);
    bpf_program__set_log_level(program, 4);  // BPF_LOG_STATS: the summary lines only
  }
  if (bpf_object__load(object.get()) != 0) return false;
  size_t i = 0;
  bpf_object__for_each_program(program, object.get()) {
    const char* log = logs[i++].get();
    ProgramCost& cost = costs[bpf_program__name(program)];
    cost.instructions = log_number(log, "processed ");
    cost.states = log_number(log, "total_states ");
    cost.microseconds.push_back(log_number(log, "verification time "));
  }
  return true;
}

long median(std::vector<long> values) {
  std::sort(values.begin(), values.end());
  return values.empty() ? 0 : values[values.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  libbpf_set_print([](libbpf_print_level, const char*, va_list) { return 0; });
  const int rounds = getenv("ROUNDS") ? atoi(getenv("ROUNDS")) : 5;
  std::vector<const char*> paths(argv + 1, argv + argc);
  if (paths.empty()) paths.push_back("build/bpf/profiler.bpf.o");
  printf("| object | program | instructions processed | states | verification (median of %d) |\n",
         rounds);
  printf("| --- | --- | ---: | ---: | ---: |\n");
  for (const char* path : paths) {
    std::map<std::string, ProgramCost> costs;
    for (int round = 0; round < rounds; ++round)
      if (!load_once(path, costs)) {
        fprintf(stderr, "verify_cost: %s does not load (root? a BPF object?)\n", path);
        return 1;
      }
    long total = 0;
    for (const auto& [name, cost] : costs) {
      total += median(cost.microseconds);
      printf("| %s | %s | %ld | %ld | %.1f ms |\n", path, name.c_str(), cost.instructions,
             cost.states, median(cost.microseconds) / 1000.0);
    }
    printf("| %s | all, one after the other | | | %.1f ms |\n", path, total / 1000.0);
  }
  return 0;
}
