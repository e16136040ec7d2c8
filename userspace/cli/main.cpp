// bpfprof: a sampling profiler for Linux that writes Firefox Profiler profiles.
#include <malloc.h>

#include <cstdio>

#include "userspace/cli/options.h"
#include "userspace/cli/summary.h"

namespace {

// Visits the parsed command line: runs the subcommand, or says why not.
struct RunCommand {
  int operator()(const bpfprof::RecordOptions& options) const {
    const auto detail =
        options.verbose ? bpfprof::SummaryDetail::kFull : bpfprof::SummaryDetail::kBrief;
    return bpfprof::run_record(options, [detail](const bpfprof::RunReport& report) {
      bpfprof::print_run_summary(report, detail, stderr);
    });
  }
  int operator()(const bpfprof::ReplayOptions& options) const {
    return bpfprof::run_replay(options);
  }
  int operator()(const bpfprof::ServeOptions& options) const { return bpfprof::run_serve(options); }
  int operator()(const bpfprof::ConvertOptions& options) const {
    return bpfprof::run_convert(options);
  }
  int operator()(const bpfprof::InformationRequest& request) const {
    fputs(request.text.c_str(), stdout);
    return 0;
  }
  int operator()(const bpfprof::UsageError& error) const {
    fprintf(stderr, "bpfprof: %s\n", error.message.c_str());
    return error.status;
  }
};

}  // namespace

int main(int argc, char** argv) {
  // Sample tables grow to hundreds of MB: keep freed memory for reuse instead of mapping
  // and faulting in fresh pages at each growth (a fifth of the CPU time on a VM).
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 256 << 20);
  mallopt(M_TOP_PAD, 16 << 20);
  // One arena: the threads that load the BPF programs and tables at the start each got an
  // arena of their own (~11 MB resident each) that was never used again.
  mallopt(M_ARENA_MAX, 1);
  return std::visit(RunCommand{}, bpfprof::parse_command_line(argc, argv));
}
