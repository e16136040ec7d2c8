// libFuzzer target for the lines and inlined methods of Java frames as bpfprof reads them
// from a JVM's memory (runtimes/hotspot/debug_info.h): all of it is the profiled process's
// to write. The input is a pretend nmethod and the memory around it, at kBase, read with
// JDK 17's layout offsets: its Method*, code range, Metadata* table, scopes and PcDescs, and
// the ConstMethods (bytecodes, line tables) its scopes point to. The first two bytes pick
// the pc inside it. The scopes must be read or refused (at most kMaxScopes, the nmethod's
// method outermost) within the read budget, each scope's line table decoded or refused;
// the input's bytes as a line table alone decode or not; never a crash, a hang or a read
// outside the input. The pc's top bit says it is a return address (an exact PcDesc).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <variant>

#include "runtimes/hotspot/debug_info.h"
#include "runtimes/hotspot/layout.h"
#include "runtimes/kit/remote_memory.h"
#include "tests/unit/hotspot_fake_nmethod.h"

using namespace bpfprof;
using namespace bpfprof::hotspot;

namespace {

constexpr uint64_t kBase = fake::kNmethodAt;

void check_method(RemoteMemory& memory, const HotSpotLayout& layout, const JavaScope& scope) {
  RemoteReader reader(memory, kDebugInfoReadBudget, 256);
  const auto code = read_method_code(reader, layout, scope.method);
  if (reader.bytes_read() > kDebugInfoReadBudget) abort();
  if (const auto* c = std::get_if<MethodCode>(&code)) {
    if (c->lines && c->lines->size() > LineTable::kMaxEntries + 1) abort();
    if (c->lines) (void)c->lines->line_at(scope.bci);
  } else if (std::get<DebugInfoError>(code).reason.empty()) {
    abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const uint16_t pc_offset = static_cast<uint16_t>(data[0] | data[1] << 8);
  const std::string image(reinterpret_cast<const char*>(data + 2), size - 2);
  if (const auto table = LineTable::decode({data + 2, size - 2}))
    if (table->size() > LineTable::kMaxEntries + 1) abort();
  BufferMemory memory;
  memory.place(kBase, image);
  const HotSpotLayout layout = fake::jdk17_debug_info_layout();
  RemoteReader words(memory, 64, 256);
  const uint64_t method = words.word(kBase + layout.compiled_method).value_or(0);
  const uint64_t code_begin = words.word(kBase + layout.blob_code_begin).value_or(0);
  RemoteReader reader(memory, kDebugInfoReadBudget, 256);
  const PcKind kind = pc_offset & 0x8000 ? PcKind::kReturnAddress : PcKind::kLeaf;
  const auto scopes =
      read_compiled_scopes(reader, layout, kBase, method, code_begin + (pc_offset & 0x7fff), kind);
  if (reader.bytes_read() > kDebugInfoReadBudget) abort();
  if (const auto* read = std::get_if<std::vector<JavaScope>>(&scopes)) {
    if (read->empty() || read->size() > kMaxScopes || read->back().method != method) abort();
    for (const JavaScope& scope : *read) {
      if (scope.bci < -1 || scope.bci > 0xfffe) abort();
      check_method(memory, layout, scope);
    }
  } else if (std::get<DebugInfoError>(scopes).reason.empty()) {
    abort();
  }
  return 0;
}
