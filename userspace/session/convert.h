// `bpfprof convert PROFILE.json.gz -o OUT.pb.gz`: a profile bpfprof wrote, in another format
// (pprof, folded stacks), from its own tables: names and addresses as they were written.
#pragma once

#include <string>

#include "userspace/output/profile_writer.h"

namespace bpfprof {

struct ConvertOptions {
  std::string input_path;
  std::string output_path = "profile.pb.gz";
  OutputFormat format = OutputFormat::kPprof;
};

// 0, or 2 with one line on stderr when the input cannot be read or the output written.
int run_convert(const ConvertOptions& options);

}  // namespace bpfprof
