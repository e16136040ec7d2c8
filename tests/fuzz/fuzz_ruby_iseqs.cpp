// libFuzzer target for CRuby's instruction sequences as bpfprof reads them from a ruby
// process (runtimes/ruby/iseqs.h): all of it is the profiled process's to write. The first
// byte picks the limits (bit 0: tight ones); the rest is a pretend process image at kImageAt
// whose first word is the iseq to name (or the C method entry), second a pc to find the line
// of, third where ruby_global_symbols is. Names, paths and line tables must be read or
// refused within the limits; never a crash, a hang or a read outside the image.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "runtimes/ruby/iseqs.h"

using namespace bpfprof;

namespace {
constexpr uint64_t kImageAt = 0x10000;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 17) return 0;
  RubyIseqLimits limits;
  uint64_t budget = 1 << 20;
  if (data[0] & 1) {
    limits = {.max_text = 16, .max_instructions = 512, .max_line_entries = 64};
    budget = 4096;
  }
  BufferMemory memory;
  memory.place(kImageAt, std::string(reinterpret_cast<const char*>(data + 1), size - 1));
  RemoteReader reader(memory, budget, 0);
  const uint64_t iseq_address = reader.word(kImageAt).value_or(0);
  const uint64_t pc = reader.word(kImageAt + 8).value_or(0);
  const uint64_t symbols = reader.word(kImageAt + 16).value_or(0);
  const std::optional<RubyIseq> iseq = read_ruby_iseq(reader, kRuby31, iseq_address, limits);
  if (iseq) {
    if (iseq->label.size() > limits.max_text || iseq->path.size() > limits.max_text) abort();
    if (iseq->lines.size() > limits.max_line_entries) abort();
    (void)iseq->line_at(pc);
    (void)iseq->line_at(iseq->encoded + 8 * (pc % (uint64_t{iseq->instructions} + 2)));
  }
  const std::optional<std::string> method =
      read_ruby_method_name(reader, kRuby31, iseq_address, symbols, limits);
  if (method && method->size() > limits.max_text) abort();
  if (reader.bytes_read() > budget) abort();
  return 0;
}
