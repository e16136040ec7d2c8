// Unwind table building (symbols/dwarf/unwind_table_cache.h): time and size per file for
// libc, libstdc++ and python3.11, cold (built) and cached (loaded), then the total for every
// executable file that a process on this machine maps (/proc/*/maps; run as root to see all).
// The cache goes to a fresh temporary directory, so "cold" is really cold.
//   unwind_table_bench [FILE...]
#include <dirent.h>
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <string>

#include "symbols/dwarf/unwind_spans.h"
#include "symbols/dwarf/unwind_table_cache.h"
#include "symbols/util/mapping_kind.h"
#include "symbols/util/proc_maps.h"

using namespace bpfprof;

namespace {

double ms(std::chrono::nanoseconds time) {
  return std::chrono::duration<double, std::milli>(time).count();
}

long max_rss_kib() {
  struct rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss;
}

struct Totals {
  size_t files = 0;
  size_t failed = 0;
  size_t rows = 0;
  double milliseconds = 0;
  double with_storing = 0;  // milliseconds of the thread's CPU, the cache's writes included
};

// One pass over `files`; prints a line per file when `verbose`.
Totals run(UnwindTableCache& cache, const std::set<std::string>& files, bool verbose) {
  Totals totals;
  for (const std::string& path : files) {
    const std::chrono::nanoseconds before = UnwindBudget::thread_cpu_time();
    CachedUnwindTableResult result = cache.get(path);
    totals.with_storing += ms(UnwindBudget::thread_cpu_time() - before);
    if (const auto* error = std::get_if<UnwindTableError>(&result)) {
      ++totals.failed;
      if (verbose) std::printf("%-48s %s\n", path.c_str(), unwind_table_error_name(*error));
      continue;
    }
    const CachedUnwindTable& table = std::get<CachedUnwindTable>(result);
    // A cached table is its compact form (the rows are not kept beside it): its entries.
    const bool compact_only = table.rows.empty() && table.compact;
    const size_t rows = compact_only ? table.compact->rows.size() : table.rows.size();
    const size_t bytes = rows * (compact_only ? sizeof(bpfprof_unwind_entry) : sizeof(UnwindRow));
    ++totals.files;
    totals.rows += rows;
    totals.milliseconds += ms(table.time);
    if (verbose)
      std::printf("%-48s %-6s %8.2f ms %8zu rows %9zu bytes\n", path.c_str(),
                  table.from_cache() ? "cached" : "built", ms(table.time), rows, bytes);
  }
  return totals;
}

std::set<std::string> mapped_executable_files() {
  std::set<std::string> files;
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return files;
  while (const dirent* entry = readdir(proc)) {
    const int pid = std::atoi(entry->d_name);
    if (pid <= 0) continue;
    for (const MapEntry& m : read_proc_maps(pid).value_or(std::vector<MapEntry>{}))
      if (m.executable && classify_mapping(m.path) == MappingKind::kFile && !m.is_deleted())
        files.insert(m.path);
  }
  closedir(proc);
  return files;
}

void print_totals(const char* what, const Totals& totals) {
  std::printf(
      "%-28s %4zu files (%zu failed) %9.1f ms (%.1f with the cache's writes) %9zu rows %10zu "
      "bytes, max RSS %ld KiB\n",
      what, totals.files, totals.failed, totals.milliseconds, totals.with_storing, totals.rows,
      totals.rows * sizeof(UnwindRow), max_rss_kib());
}

}  // namespace

int main(int argc, char** argv) {
  char pattern[] = "/tmp/bpfprof-unwind-bench-XXXXXX";
  if (mkdtemp(pattern) == nullptr) return 1;
  std::set<std::string> named;
  for (int i = 1; i < argc; ++i) named.insert(argv[i]);
  if (named.empty())
    named = {"/lib/x86_64-linux-gnu/libc.so.6", "/usr/lib/x86_64-linux-gnu/libstdc++.so.6",
             "/usr/bin/python3.11"};
  {
    UnwindTableCache cache(std::string(pattern) + "/named");
    print_totals("named files, cold:", run(cache, named, true));
    print_totals("named files, cached:", run(cache, named, true));
  }
  const std::set<std::string> mapped = mapped_executable_files();
  UnwindTableCache cache(std::string(pattern) + "/mapped");
  print_totals("all mapped files, cold:", run(cache, mapped, false));
  print_totals("all mapped files, cached:", run(cache, mapped, false));
  std::filesystem::remove_all(pattern);
  return 0;
}
