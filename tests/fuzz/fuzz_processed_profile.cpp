// libFuzzer target for `bpfprof convert`'s input: a processed profile read back into the
// built tables (userspace/output/processed_profile_reader), then written as pprof. Bad input
// must be a std::runtime_error; anything accepted must write without reading out of bounds.
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "userspace/output/pprof_writer.h"
#include "userspace/output/processed_profile_reader.h"

using namespace bpfprof;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::unique_ptr<ReadProfile> read;
  try {
    read = parse_processed_profile(std::string(reinterpret_cast<const char*>(data), size));
  } catch (const std::runtime_error&) {
    return 0;
  }
  StringSink sink;
  write_pprof(read->profile, read->settings, sink);
  return 0;
}
