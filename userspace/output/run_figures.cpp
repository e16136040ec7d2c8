#include "userspace/output/run_figures.h"

#include "userspace/output/allocations_table.h"

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

// The frame under the root of an output stack (the root being [truncated]); none for a stack
// of the root alone.
std::optional<FrameIndex> frame_under_root(const StackTable& stacks, StackIndex stack) {
  std::optional<StackIndex> under;
  for (std::optional<StackIndex> up = stacks.prefix(stack); up; up = stacks.prefix(stack)) {
    under = stack;
    stack = *up;
  }
  if (!under) return std::nullopt;
  return stacks.frame(*under);
}

// The name of a function, with its library's where it has one.
std::string function_and_library(const SharedTables& t, FuncIndex func) {
  const FuncTable::Func& f = t.funcs[func];
  std::string name = t.strings.strings()[f.name.value];
  if (f.resource) name += " (" + t.strings.strings()[t.resources.name(*f.resource).value] + ")";
  return name;
}

// `weight_by_func`'s functions, heaviest first, at most `count`, each with its weight over
// `total`.
std::vector<std::pair<std::string, double>> ranked_functions(
    const SharedTables& t, const std::unordered_map<uint32_t, double>& weight_by_func, double total,
    size_t count) {
  std::vector<std::pair<uint32_t, double>> ranked(weight_by_func.begin(), weight_by_func.end());
  std::sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) {
    return a.second > b.second || (a.second == b.second && a.first < b.first);
  });
  if (ranked.size() > count) ranked.resize(count);
  std::vector<std::pair<std::string, double>> result;
  for (const auto& [func, weight] : ranked)
    result.emplace_back(function_and_library(t, FuncIndex{func}), total > 0 ? weight / total : 0);
  return result;
}

}  // namespace

UserStackFigures measure_user_stacks(const WrittenStacks& written,
                                     const std::vector<StackRoot>& root_of) {
  UserStackFigures figures;
  std::map<uint32_t, StackCompleteness> by_process;  // by ProcessIndex
  std::unordered_map<uint32_t, double> truncated_by_func;
  for_each_on_cpu_sample(written, [&](const Thread& th, const ThreadSample& s) {
    const StackRoot root = root_of[s.stack];
    if (root == StackRoot::kNoUserFrames) return;
    StackCompleteness& process = by_process[th.process.value];
    process.total += s.weight;
    figures.all.total += s.weight;
    if (root != StackRoot::kThreadRoot) {
      const auto under = frame_under_root(written.shared.stacks, written.output_stack_of[s.stack]);
      if (under) truncated_by_func[written.shared.frames[*under].func.value] += s.weight;
      return;
    }
    process.complete += s.weight;
    figures.all.complete += s.weight;
  });
  figures.truncated_at =
      ranked_functions(written.shared, truncated_by_func, figures.all.total, kTruncatedAtKept);
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
  std::unordered_map<uint32_t, double> weight_by_func;
  double total = 0;
  for_each_on_cpu_sample(written, [&](const Thread&, const ThreadSample& s) {
    weight_by_func[t.frames[leaf_frame(written, s.stack)].func.value] += s.weight;
    total += s.weight;
  });
  return ranked_functions(t, weight_by_func, total, count);
}

namespace {

// The innermost `depth` functions of a stack, innermost first.
std::string innermost_functions(const SharedTables& t, StackIndex stack, size_t depth) {
  std::string text;
  std::optional<StackIndex> at = stack;
  for (size_t i = 0; at && i < depth; ++i, at = t.stacks.prefix(*at))
    text.append(i ? " < " : "")
        .append(t.strings.strings()[t.funcs[t.frames[t.stacks.frame(*at)].func].name.value]);
  return text;
}

// The stack from its innermost frame outside the C library on (its system-call wrappers and
// malloc's internals say nothing of who asked); the stack itself when it is all in it.
StackIndex outside_the_c_library(const SharedTables& t, StackIndex stack) {
  auto in_libc = [&](StackIndex at) {
    const std::optional<ResourceIndex> resource =
        t.funcs[t.frames[t.stacks.frame(at)].func].resource;
    return resource &&
           t.strings.strings()[t.resources.name(*resource).value].starts_with("libc.so");
  };
  for (std::optional<StackIndex> at = stack; at; at = t.stacks.prefix(*at))
    if (!in_libc(*at)) return *at;
  return stack;
}

}  // namespace

namespace {

// The bytes `for_each_row` gives (it calls add(stack, bytes) for each row), summed, by the
// innermost functions of their stacks.
// `named_from` gives the part of a stack to name it by.
template <typename ForEachRow>
MemoryGrowth bytes_by_stack(const WrittenStacks& written, size_t count, ForEachRow for_each_row,
                            StackIndex (*named_from)(const SharedTables&, StackIndex) = nullptr) {
  MemoryGrowth growth;
  std::unordered_map<uint32_t, uint64_t> by_stack;  // by output stack
  for_each_row([&](StackId stack, uint64_t bytes) {
    growth.bytes += bytes;
    if (stack != ResolvedStackTree::kRoot) by_stack[written.output_stack_of[stack].value] += bytes;
  });
  // Stacks that differ only further out (two call sites of one function) are one entry.
  constexpr size_t kNamedFrames = 3;
  std::map<std::string, uint64_t> by_name;
  for (const auto& [stack, bytes] : by_stack) {
    StackIndex named{stack};
    if (named_from) named = named_from(written.shared, named);
    by_name[innermost_functions(written.shared, named, kNamedFrames)] += bytes;
  }
  growth.top_stacks.assign(by_name.begin(), by_name.end());
  std::stable_sort(growth.top_stacks.begin(), growth.top_stacks.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  if (growth.top_stacks.size() > count) growth.top_stacks.resize(count);
  return growth;
}

// The rows of allocations that `keep` keeps, summed by stack.
template <typename Keep>
MemoryGrowth rows_by_stack(const WrittenStacks& written, size_t count, Keep keep) {
  return bytes_by_stack(written, count, [&](auto add) {
    for (size_t t = 0; t < written.threads.size(); ++t) {
      const std::vector<ThreadAllocation>& rows = written.threads[t]->allocations;
      for (size_t i = 0; i < rows.size(); ++i)
        if (rows[i].bytes > 0 && keep(t, i))
          add(rows[i].stack, static_cast<uint64_t>(rows[i].bytes));
    }
  });
}

}  // namespace

MemoryGrowth memory_growth(const WrittenStacks& written, size_t count) {
  return rows_by_stack(written, count, [](size_t, size_t) { return true; });
}

MemoryGrowth memory_held(const WrittenStacks& written, size_t count) {
  std::vector<ProcessRows> lists;
  for (const Thread* th : written.threads)
    lists.emplace_back(written.model.processes()[th->process.value].pid, &th->allocations);
  const std::vector<std::vector<bool>> held = blocks_held(lists);
  return rows_by_stack(written, count, [&](size_t t, size_t i) { return held[t][i]; });
}

AddressSpaceGrowth address_space_growth(const WrittenStacks& written, size_t count) {
  AddressSpaceGrowth result;
  result.grown = bytes_by_stack(
      written, count,
      [&](auto add) {
        for (const Thread* th : written.threads)
          for (const ThreadAddressSpaceCall& c : th->address_space_calls) {
            ++result.calls;
            if (c.sampled_bytes > 0)
              add(c.stack, static_cast<uint64_t>(c.sampled_bytes));
            else
              result.shrunk_bytes += static_cast<uint64_t>(-c.sampled_bytes);
          }
      },
      outside_the_c_library);
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
