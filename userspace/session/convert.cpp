#include "userspace/session/convert.h"

#include <cstdio>
#include <exception>

#include "userspace/output/collapsed_stacks.h"
#include "userspace/output/output_file.h"
#include "userspace/output/pprof_writer.h"
#include "userspace/output/processed_profile_reader.h"

namespace bpfprof {

int run_convert(const ConvertOptions& options) {
  try {
    if (options.format == OutputFormat::kFirefox)
      throw std::runtime_error(
          "the input is already a Firefox profile: give --format pprof or collapsed");
    const std::unique_ptr<ReadProfile> read = read_processed_profile(options.input_path);
    std::unique_ptr<CommittableSink> output = open_output(options.output_path);
    if (options.format == OutputFormat::kPprof)
      write_pprof(read->profile, read->settings, *output);
    else
      write_collapsed_stacks(read->profile, *output);
    output->commit();
    fprintf(stderr, "bpfprof: wrote %s\n", options.output_path.c_str());
    return 0;
  } catch (const std::exception& e) {
    fprintf(stderr, "bpfprof: %s\n", e.what());
    return 2;
  }
}

}  // namespace bpfprof
