// Names the instruction sequences the BPF side reports, and the C methods: reads each
// rb_iseq_t (or a C method's entry) once from the live process (its body's label, path and first
// line, and its line table: iseq_insn_info entries found by position, or by the succinct index
// CRuby encodes the positions into) and turns a frame's pc into a line.
//
// The process's memory is untrusted input: every read goes through a budgeted RemoteReader
// (runtimes/kit/remote_memory.h), every size read from it is bounded, and an iseq that
// makes no sense gives no name (the caller shows an "[unknown Ruby code]" frame).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "runtimes/kit/remote_memory.h"
#include "runtimes/ruby/layout.h"

namespace bpfprof {

struct RubyIseqLimits {
  size_t max_text = 4096;                // bytes of a label or path
  uint32_t max_instructions = 1u << 20;  // iseq_size, in VALUEs
  uint32_t max_line_entries = 1u << 16;  // insns_info.size
};

struct RubyIseq {
  std::string label;  // "digest", "block in work", "<main>"
  std::string path;
  uint32_t first_line = 0;
  uint64_t encoded = 0;             // iseq_encoded: where pcs point
  uint32_t instructions = 0;        // iseq_size
  std::vector<uint32_t> lines;      // each insn_info entry's line
  std::vector<uint32_t> positions;  // each entry's first instruction, when the iseq keeps them
  std::vector<uint64_t> succinct;   // else the succinct index (words), as CRuby lays it out

  // The line of the instruction before `pc` (a frame's pc is the next one to run).
  std::optional<uint32_t> line_at(uint64_t pc) const;
};

// Reads the iseq at `iseq` within `reader`'s budget; nullopt when it is no iseq or unreadable.
std::optional<RubyIseq> read_ruby_iseq(RemoteReader& reader, const RubyLayout& layout,
                                       uint64_t iseq, const RubyIseqLimits& limits = {});

// The name of the method of a C method's frame (a cfunc), as Ruby's backtraces label it:
// its method entry's definition's original_id, named through ruby_global_symbols.
std::optional<std::string> read_ruby_method_name(RemoteReader& reader, const RubyLayout& layout,
                                                 uint64_t method_entry, uint64_t global_symbols,
                                                 const RubyIseqLimits& limits = {});

// A Ruby String's bytes (embedded or on the heap), or a pathobj's ([path, realpath]: path).
std::optional<std::string> read_ruby_string(RemoteReader& reader, const RubyLayout& layout,
                                            uint64_t value, size_t max_bytes);

}  // namespace bpfprof
