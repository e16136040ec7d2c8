// A set of labels a program put on its work (Go's pprof.Do / SetGoroutineLabels: endpoint,
// tenant, job) as one frame at the root of a sample's stack: "[labels] k=v, k2=v2". The frame
// is what the Firefox profile and folded stacks show (a stack per label set, found by search);
// pprof output turns it back into its sample labels (`go tool pprof -tags`). The name is
// reversible: a backslash escapes '\', ',' and '=' in keys and values.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace bpfprof {

using LabelSet = std::vector<std::pair<std::string, std::string>>;  // in the program's order

inline constexpr std::string_view kLabelFramePrefix = "[labels] ";

// The frame's name; "[labels]" alone for an empty set.
std::string label_frame_name(const LabelSet& labels);

// The set a frame name holds; nullopt for a name that is not a label frame's (or is not one
// label_frame_name makes).
std::optional<LabelSet> parse_label_frame_name(std::string_view name);

}  // namespace bpfprof
