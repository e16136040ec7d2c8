// Go's function tables (symbols/go/pclntab.h): the time to find and parse a Go binary's
// pclntab (the whole file already in memory, as the symbolizer reads it), and the cost of a
// lookup (frames_at: function, file, line and inline frames) at pcs spread over its text.
//   go_pclntab_bench [BINARY...]   (default: the Go toolchain's compile and the Cloud SDK's
//                                   kubectl, when installed)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "symbols/go/pclntab.h"

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

void bench(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<uint8_t> bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  if (bytes.empty()) {
    printf("%s: not readable\n", path.c_str());
    return;
  }
  constexpr int kRounds = 5;
  std::vector<double> parse_ms;
  std::unique_ptr<bpfprof::go::GoTable> table;
  for (int round = 0; round < kRounds; ++round) {
    const Clock::time_point start = Clock::now();
    std::string error;
    table = bpfprof::go::GoTable::from_elf(bytes, &error);
    parse_ms.push_back(ms_since(start));
    if (!table) {
      printf("%s: %s\n", path.c_str(), error.c_str());
      return;
    }
  }
  std::sort(parse_ms.begin(), parse_ms.end());
  constexpr uint64_t kLookups = 100000;
  const uint64_t step = (table->text_end() - table->text_begin()) / kLookups + 1;
  size_t frames = 0, lookups = 0;
  const Clock::time_point start = Clock::now();
  for (uint64_t pc = table->text_begin(); pc < table->text_end(); pc += step, ++lookups)
    frames += table->frames_at(pc).size();
  const double lookup_ms = ms_since(start);
  printf(
      "%s: %.1f MB, %s table, %zu functions; parse %.1f ms (median of %d, min %.1f); "
      "lookup %.2f us (%zu pcs, %.2f frames each)\n",
      path.c_str(), bytes.size() / 1e6, std::string(format_name(table->format())).c_str(),
      table->function_count(), parse_ms[kRounds / 2], kRounds, parse_ms[0],
      1000 * lookup_ms / lookups, lookups, double(frames) / lookups);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> paths(argv + 1, argv + argc);
  if (paths.empty())
    paths = {"/usr/lib/go-1.19/pkg/tool/linux_amd64/compile", "/usr/lib/google-cloud-sdk/bin/cbt",
             "/usr/lib/google-cloud-sdk/bin/kubectl"};
  for (const std::string& path : paths) bench(path);
}
