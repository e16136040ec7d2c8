// userspace/model/unwind_report.h: the profile's lines on where user stacks were unwound, here
// the processes whose kernel walks fell back to stack copies most.
#include "userspace/model/unwind_report.h"

#include <gtest/gtest.h>

#include <string>

namespace bpfprof {
namespace {

std::string entry(const Recording& recording, const std::string& label) {
  for (const auto& [name, value] : stack_source_report(recording))
    if (name == label) return value;
  return "(none)";
}

TEST(UnwindReport, NamesTheThreeProcessesWithTheMostCopies) {
  Recording recording;
  recording.call_graph = CallGraph::kDwarf;
  recording.stats.samples = 10000;
  recording.stats.stack_copies_by_process = {
      {Pid{812}, 9684}, {Pid{790}, 12}, {Pid{14}, 3}, {Pid{15}, 1}, {Pid{16}, 1}};
  EXPECT_EQ(entry(recording, "Stack copies by process"),
            "pid 812 9,684, pid 790 12, pid 14 3 (of 5 processes)");
}

TEST(UnwindReport, SaysNothingOfCopiesWhenNoWalkFellBack) {
  Recording recording;
  recording.call_graph = CallGraph::kDwarf;
  recording.stats.samples = 100;
  EXPECT_EQ(entry(recording, "Stack copies by process"), "(none)");
}

}  // namespace
}  // namespace bpfprof
