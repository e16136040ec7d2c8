// Writes the profile of the hand-made session of synthetic_session.h to the file given, as
// `bpfprof record` would (gzip when the name ends in .gz): no BPF, no root, no binaries.
// tests/integration/writer.test.mjs loads it with profiler-cli; with `pprof` after the name
// it is written as pprof (tests/integration/pprof.test.mjs reads it with go tool pprof).
#include <cstdio>
#include <exception>
#include <string>

#include "tests/support/synthetic_session.h"
#include "userspace/output/output_file.h"
#include "userspace/output/profile_writer.h"

int main(int argc, char** argv) {
  using namespace bpfprof;
  if (argc != 2 && !(argc == 3 && std::string(argv[2]) == "pprof")) {
    fprintf(stderr, "usage: %s OUTPUT.json.gz | OUTPUT.pb.gz pprof\n", argv[0]);
    return 2;
  }
  try {
    const Recording recording = synthetic::demo_recording();
    SessionModel model;
    RawStackTree raw;
    synthetic::build_demo_model(model, recording, raw);
    synthetic::FakeSymbolizer symbolizer;
    std::unique_ptr<CommittableSink> output = open_output(argv[1]);
    ProfileOptions options;
    if (argc == 3) options.format = OutputFormat::kPprof;
    write_profile_with_report(model, recording, *output, options, symbolizer);
    output->commit();
  } catch (const std::exception& e) {
    fprintf(stderr, "write_demo_profile: %s\n", e.what());
    return 1;
  }
  return 0;
}
