// A pretend nmethod for the lines and inlined methods of Java frames
// (runtimes/hotspot/debug_info.h): the layout JDK 17 (Debian's 17.0.15) gives for the fields
// that are read, and the address the nmethod is placed at. The unit tests build one from it
// (tests/unit/hotspot_debug_info_test.cpp) and the fuzzer reads its input through it.
#pragma once

#include <cstdint>

#include "runtimes/hotspot/layout.h"

namespace bpfprof::hotspot::fake {

constexpr uint64_t kNmethodAt = 0x7f0000100000;

inline HotSpotLayout jdk17_debug_info_layout() {
  HotSpotLayout l;
  l.blob_code_begin = 32;
  l.blob_code_end = 40;
  l.compiled_method = 112;
  l.method_const_method = 8;
  DebugInfoLayout d;
  d.const_method_size = 48;
  d.const_method_flags = 28;
  d.const_method_code_size = 32;
  d.has_line_table = 1;
  d.nmethod_metadata = 260;
  d.scopes_data_begin = 120;
  d.nmethod_scopes_pcs = 268;
  d.nmethod_dependencies = 272;
  d.pc_desc_size = 16;
  d.pc_desc_pc_offset = 0;
  d.pc_desc_scope_decode_offset = 4;
  l.debug_info = d;
  return l;
}

}  // namespace bpfprof::hotspot::fake
