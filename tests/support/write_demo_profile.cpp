// Writes the profile of the hand-made session of synthetic_session.h to the file given, as
// `bpfprof record` would (gzip when the name ends in .gz): no BPF, no root, no binaries.
// tests/integration/writer.test.mjs loads it with profiler-cli.
#include <cstdio>
#include <exception>

#include "tests/support/synthetic_session.h"
#include "userspace/output/output_file.h"
#include "userspace/output/profile_writer.h"

int main(int argc, char** argv) {
  using namespace bpfprof;
  if (argc != 2) {
    fprintf(stderr, "usage: %s OUTPUT.json.gz\n", argv[0]);
    return 2;
  }
  try {
    const Recording recording = testing::demo_recording();
    SessionModel model;
    RawStackTree raw;
    testing::build_demo_model(model, recording, raw);
    testing::FakeSymbolizer symbolizer;
    std::unique_ptr<CommittableSink> output = open_output(argv[1]);
    write_profile_with_report(model, recording, *output, ProfileOptions{}, symbolizer);
    output->commit();
  } catch (const std::exception& e) {
    fprintf(stderr, "write_demo_profile: %s\n", e.what());
    return 1;
  }
  return 0;
}
