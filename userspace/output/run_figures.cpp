#include "userspace/output/run_figures.h"

#include <algorithm>
#include <map>
#include <optional>
#include <unordered_map>

namespace bpfprof {

namespace {

bool is_off_cpu_sample(const SessionModel& model, const ThreadSample& s) {
  return s.stack != ResolvedStackTree::kRoot && model.stacks().node(s.stack).key.is_off_cpu_state();
}

// Calls `f(thread, sample)` for each on-CPU sample with a stack.
template <typename F>
void for_each_on_cpu_sample(const WrittenStacks& written, F f) {
  for (const Thread* th : written.threads)
    for (const ThreadSample& s : th->samples)
      if (s.stack != ResolvedStackTree::kRoot && !is_off_cpu_sample(written.model, s)) f(*th, s);
}

FrameIndex leaf_frame(const WrittenStacks& written, StackId stack) {
  return written.shared.stacks.frame(written.output_stack_of[stack]);
}

}  // namespace

UserStackFigures measure_user_stacks(const WrittenStacks& written,
                                     const std::vector<StackRoot>& root_of) {
  UserStackFigures figures;
  std::map<uint32_t, StackCompleteness> by_process;  // by ProcessIndex
  for_each_on_cpu_sample(written, [&](const Thread& th, const ThreadSample& s) {
    const StackRoot root = root_of[s.stack];
    if (root == StackRoot::kNoUserFrames) return;
    StackCompleteness& process = by_process[th.process.value];
    process.total += s.weight;
    figures.all.total += s.weight;
    if (root != StackRoot::kThreadRoot) return;
    process.complete += s.weight;
    figures.all.complete += s.weight;
  });
  for (const auto& [process, stacks] : by_process) {
    if (stacks.complete >= stacks.total) continue;
    const Process& p = written.model.processes()[process];
    figures.incomplete_by_process.emplace_back(p.name + " (" + std::to_string(p.pid.value) + ")",
                                               stacks);
  }
  std::stable_sort(figures.incomplete_by_process.begin(), figures.incomplete_by_process.end(),
                   [](const auto& a, const auto& b) {
                     return a.second.total - a.second.complete > b.second.total - b.second.complete;
                   });
  return figures;
}

std::vector<std::pair<std::string, double>> unnamed_share_by_library(
    const WrittenStacks& written, const std::unordered_set<uint32_t>& unnamed_frames) {
  std::unordered_map<int32_t, double> by_lib;  // -1: outside any mapping
  double total = 0;
  for_each_on_cpu_sample(written, [&](const Thread&, const ThreadSample& s) {
    total += s.weight;
    const FrameIndex frame = leaf_frame(written, s.stack);
    if (!unnamed_frames.contains(frame.value)) return;
    const std::optional<LibIndex> lib = written.shared.frames[frame].lib;
    by_lib[lib ? static_cast<int32_t>(lib->value) : -1] += s.weight;
  });
  std::vector<std::pair<std::string, double>> shares;
  for (const auto& [lib, weight] : by_lib)
    shares.emplace_back(lib >= 0 ? written.libs[LibIndex{static_cast<uint32_t>(lib)}].name
                                 : "(outside any mapping)",
                        weight / total);
  std::sort(shares.begin(), shares.end(),
            [](const auto& a, const auto& b) { return a.second > b.second; });
  return shares;
}

std::vector<std::string> unnamed_library_paths(
    const std::vector<std::pair<std::string, double>>& shares, const LibTable& libs) {
  std::vector<std::string> paths;
  for (size_t i = 0; i < shares.size() && i < 3; ++i) {
    if (shares[i].second < 0.01) break;
    for (const LibraryDescription& lib : libs.rows()) {
      if (lib.name == shares[i].first && !lib.path.empty()) {
        paths.push_back(lib.path);
        break;
      }
    }
  }
  return paths;
}

std::vector<std::pair<std::string, double>> top_self_functions(const WrittenStacks& written,
                                                               size_t count) {
  const SharedTables& t = written.shared;
  std::unordered_map<int32_t, double> weight_by_func;
  double total = 0;
  for_each_on_cpu_sample(written, [&](const Thread&, const ThreadSample& s) {
    weight_by_func[static_cast<int32_t>(t.frames[leaf_frame(written, s.stack)].func.value)] +=
        s.weight;
    total += s.weight;
  });
  std::vector<std::pair<int32_t, double>> ranked(weight_by_func.begin(), weight_by_func.end());
  std::sort(ranked.begin(), ranked.end(),
            [](const auto& a, const auto& b) { return a.second > b.second; });
  if (ranked.size() > count) ranked.resize(count);
  std::vector<std::pair<std::string, double>> result;
  for (const auto& [func, weight] : ranked) {
    const FuncTable::Func& f = t.funcs[FuncIndex{static_cast<uint32_t>(func)}];
    std::string name = t.strings.strings()[f.name.value];
    if (f.resource) name += " (" + t.strings.strings()[t.resources.name(*f.resource).value] + ")";
    result.emplace_back(std::move(name), weight / total);
  }
  return result;
}

std::vector<double> source_weights(const WrittenStacks& written) {
  const SharedTables& t = written.shared;
  std::unordered_map<uint32_t, double> weight_by_stack;  // by output stack
  for_each_on_cpu_sample(written, [&](const Thread&, const ThreadSample& s) {
    weight_by_stack[written.output_stack_of[s.stack].value] += s.weight;
  });
  std::vector<double> weights(t.sources.size());
  std::vector<int64_t> counted_for(t.sources.size(), -1);  // the stack a file last counted for
  for (const auto& [stack, weight] : weight_by_stack) {
    for (std::optional<StackIndex> i = StackIndex{stack}; i; i = t.stacks.prefix(*i)) {
      const std::optional<SourceIndex> source = t.funcs[t.frames[t.stacks.frame(*i)].func].source;
      if (!source || counted_for[source->value] == stack) continue;
      counted_for[source->value] = stack;
      weights[source->value] += weight;
    }
  }
  return weights;
}

}  // namespace bpfprof
