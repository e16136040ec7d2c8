#include "userspace/output/collapsed_stacks.h"

#include <cmath>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

namespace bpfprof {

namespace {

// ';' separates frames and '\n' lines: names must not contain them.
std::string clean(std::string name) {
  for (char& ch : name)
    if (ch == ';')
      ch = ',';
    else if (ch == '\n' || ch == '\r')
      ch = ' ';
  return name;
}

// The folded line of a stack, without its count.
std::string folded_line(const SharedTables& shared, const std::string& prefix,
                        std::optional<StackIndex> stack) {
  std::vector<std::string> names;  // innermost first
  for (; stack; stack = shared.stacks.prefix(*stack))
    names.push_back(clean(function_name(shared, shared.stacks.frame(*stack))));
  std::string line = prefix;
  for (auto name = names.rbegin(); name != names.rend(); ++name) line += ";" + *name;
  return line;
}

}  // namespace

void write_collapsed_stacks(const BuiltProfile& profile, OutputSink& sink) {
  std::map<std::string, double> weight_by_line;
  for (const ThreadTables& th : profile.threads) {
    const std::string prefix =
        clean(th.show_container ? with_container(th.process_name, th.context) : th.process_name) +
        " (" + std::to_string(th.pid.value) + ");" + clean(th.name);
    // The same stack recurs often; uint32 max stands for the empty stack.
    std::unordered_map<uint32_t, std::string> line_of;
    for (size_t i = 0; i < th.samples.size(); ++i) {
      const SamplesTable::Sample s = th.samples.row(i);
      if (s.weight <= 0) continue;
      auto [it, inserted] = line_of.try_emplace(s.stack ? s.stack->value : UINT32_MAX);
      if (inserted) it->second = folded_line(profile.shared, prefix, s.stack);
      weight_by_line[it->second] += s.weight;
    }
  }
  std::string out;
  for (const auto& [line, weight] : weight_by_line) {
    const auto count = static_cast<uint64_t>(std::llround(weight));
    if (count == 0) continue;
    out += line;
    out += ' ';
    out += std::to_string(count);
    out += '\n';
    if (out.size() > (1 << 20)) {  // written in pieces: a system-wide profile is large
      sink.write(out);
      out.clear();
    }
  }
  sink.write(out);
}

}  // namespace bpfprof
