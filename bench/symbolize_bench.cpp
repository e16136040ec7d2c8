// How long symbolization takes: N unique addresses (1k, 10k, 100k) spread evenly at random
// over the executable segments of real binaries (libc, libstdc++, python3.11: ELF symbols,
// DWARF with inline frames and lines when debug files are installed) and over kernel text
// (/proc/kallsyms), symbolized with bpfprof::Symbolizer.
//
//   cold: a new Symbolizer per iteration (opening and indexing the files is counted)
//   warm: one Symbolizer that has already symbolized the same addresses once
//
// Reported: the iteration time (all N addresses), `per_address` (time per address), and
// `named` / `with_line` / `frames` (share of addresses named, with a source line, and frames
// per address, inline frames included), so a fast run that names nothing stands out.
//
//   build/bench/symbolize_bench [--benchmark_filter=libc]
#include <benchmark/benchmark.h>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <unordered_set>
#include <vector>

#include "symbols/elf/elf_file.h"
#include "symbols/kernel/kallsyms.h"
#include "symbols/symbolizer.h"

namespace bpfprof {
namespace {

constexpr uint64_t kSeed = 20261122;

struct Target {
  const char* label;
  const char* path;  // nullptr: the kernel
};

constexpr Target kTargets[] = {
    {"libc", "/usr/lib/x86_64-linux-gnu/libc.so.6"},
    {"libstdcxx", "/usr/lib/x86_64-linux-gnu/libstdc++.so.6"},
    {"python3.11", "/usr/bin/python3.11"},
    {"kernel", nullptr},
};

// N distinct file offsets inside the file's executable PT_LOAD segments, in random order.
std::optional<std::vector<uint64_t>> file_offsets(const std::string& path, size_t n,
                                                  std::string* error) {
  std::unique_ptr<ElfFile> elf = ElfFile::open(path, error);
  if (!elf) return std::nullopt;
  std::vector<std::pair<uint64_t, uint64_t>> ranges;  // [begin, end) file offsets
  uint64_t total = 0;
  for (const LoadSegment& s : elf->load_segments()) {
    if (!s.executable() || s.file_size == 0) continue;
    ranges.emplace_back(s.file_offset, s.file_offset + s.file_size);
    total += s.file_size;
  }
  if (total < n) {
    *error = path + ": fewer executable bytes than addresses";
    return std::nullopt;
  }
  std::mt19937_64 rng(kSeed);
  std::unordered_set<uint64_t> seen;
  std::vector<uint64_t> out;
  out.reserve(n);
  while (out.size() < n) {
    uint64_t k = rng() % total;
    for (const auto& [begin, end] : ranges) {
      if (k < end - begin) {
        if (seen.insert(begin + k).second) out.push_back(begin + k);
        break;
      }
      k -= end - begin;
    }
  }
  return out;
}

// N distinct kernel text addresses inside vmlinux's text symbols (modules left out).
std::optional<std::vector<uint64_t>> kernel_addresses(size_t n, std::string* error) {
  std::optional<KernelSymbols> symbols = KernelSymbols::load();
  if (!symbols || symbols->addresses_hidden()) {
    *error = "kernel addresses unavailable (/proc/kallsyms unreadable or hidden: run as root)";
    return std::nullopt;
  }
  std::vector<KernelSymbol> text;
  for (size_t i = 0; i < symbols->size(); ++i)
    if (const KernelSymbol s = (*symbols)[i]; s.module.empty() && s.end > s.address)
      text.push_back(s);
  if (text.empty()) {
    *error = "no vmlinux text symbols";
    return std::nullopt;
  }
  std::mt19937_64 rng(kSeed);
  std::unordered_set<uint64_t> seen;
  std::vector<uint64_t> out;
  out.reserve(n);
  for (size_t attempts = 0; out.size() < n && attempts < 100 * n; ++attempts) {
    const KernelSymbol& s = text[rng() % text.size()];
    const uint64_t a = s.address + rng() % (s.end - s.address);
    if (seen.insert(a).second) out.push_back(a);
  }
  return out;
}

// The addresses of one case, made once per (target, n) and kept for all its runs.
const std::vector<uint64_t>* addresses_for(const Target& target, size_t n, std::string* error) {
  static std::map<std::pair<std::string, size_t>, std::optional<std::vector<uint64_t>>> cache;
  static std::map<std::pair<std::string, size_t>, std::string> errors;
  const auto key = std::make_pair(std::string(target.label), n);
  auto it = cache.find(key);
  if (it == cache.end()) {
    std::string why;
    auto addresses = target.path ? file_offsets(target.path, n, &why) : kernel_addresses(n, &why);
    errors[key] = why;
    it = cache.emplace(key, std::move(addresses)).first;
  }
  *error = errors[key];
  return it->second ? &*it->second : nullptr;
}

struct Tally {
  size_t named = 0;
  size_t with_line = 0;
  size_t frames = 0;
};

void symbolize_all(Symbolizer& sym, const Target& target, const std::vector<uint64_t>& addresses,
                   Tally* tally) {
  for (uint64_t a : addresses) {
    std::vector<SymbolizedFrame> frames =
        target.path ? sym.symbolize_in_file(target.path, a) : sym.symbolize_kernel(a);
    if (tally) {
      tally->frames += frames.size();
      if (!frames.empty() && !frames.back().name.empty()) tally->named++;
      if (!frames.empty() && frames.back().line) tally->with_line++;
    }
    benchmark::DoNotOptimize(frames);
  }
}

void report(benchmark::State& state, const Tally& tally, size_t n) {
  state.counters["per_address"] =
      benchmark::Counter(static_cast<double>(n) * static_cast<double>(state.iterations()),
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.counters["named"] = static_cast<double>(tally.named) / static_cast<double>(n);
  state.counters["with_line"] = static_cast<double>(tally.with_line) / static_cast<double>(n);
  state.counters["frames"] = static_cast<double>(tally.frames) / static_cast<double>(n);
}

void BM_SymbolizeCold(benchmark::State& state, Target target) {
  const auto n = static_cast<size_t>(state.range(0));
  std::string error;
  const std::vector<uint64_t>* addresses = addresses_for(target, n, &error);
  if (!addresses) {
    state.SkipWithError(error.c_str());
    return;
  }
  Tally tally;
  bool first = true;
  for (auto _ : state) {
    Symbolizer sym(SymbolizerOptions{/*symbol_dirs=*/{}});
    symbolize_all(sym, target, *addresses, first ? &tally : nullptr);
    first = false;
  }
  report(state, tally, n);
}

void BM_SymbolizeWarm(benchmark::State& state, Target target) {
  const auto n = static_cast<size_t>(state.range(0));
  std::string error;
  const std::vector<uint64_t>* addresses = addresses_for(target, n, &error);
  if (!addresses) {
    state.SkipWithError(error.c_str());
    return;
  }
  Symbolizer sym(SymbolizerOptions{/*symbol_dirs=*/{}});
  Tally tally;
  symbolize_all(sym, target, *addresses, &tally);  // warm-up, not timed
  for (auto _ : state) symbolize_all(sym, target, *addresses, nullptr);
  report(state, tally, n);
}

void register_all() {
  for (const Target& target : kTargets) {
    if (target.path && access(target.path, R_OK) != 0) {
      std::fprintf(stderr, "symbolize_bench: %s not found, its cases are left out\n", target.path);
      continue;
    }
    for (auto [kind, fn] :
         {std::pair{"cold", &BM_SymbolizeCold}, std::pair{"warm", &BM_SymbolizeWarm}}) {
      const std::string name = std::string("symbolize/") + target.label + "/" + kind;
      benchmark::RegisterBenchmark(name.c_str(), fn, target)
          ->Arg(1000)
          ->Arg(10000)
          ->Arg(100000)
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime();
    }
  }
}

}  // namespace
}  // namespace bpfprof

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  bpfprof::register_all();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
