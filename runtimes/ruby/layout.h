// Where CRuby keeps what a profiler reads: the offsets of the fields of rb_vm_t, rb_ractor_t,
// rb_thread_t, rb_execution_context_t, rb_control_frame_t, rb_iseq_t and its constant body,
// and of strings and arrays, that the frame walk (runtimes/ruby/frames.bpf.h) and the naming
// of instruction sequences read. CRuby describes none of this in its binary (vm_core.h is
// internal), so the numbers come from the release's headers, one entry per version, and
// tests/integration/ruby/offsets.rb checks an entry against a running interpreter (Fiddle).
#pragma once

#include <cstdint>

namespace bpfprof {

struct RubyVersion {
  int major = 0;
  int minor = 0;
  bool operator==(const RubyVersion&) const = default;
};

struct RubyLayout {
  RubyVersion version;
  // Finding a thread's execution context: ruby_current_vm_ptr -> main ractor -> its thread
  // list (rb_thread_t starts with its list node) -> the thread whose thread_id, which is
  // pthread_self(), the FS base on x86-64, is the sampled thread's -> its ec.
  uint32_t vm_main_ractor;
  uint32_t ractor_threads_head;
  uint32_t thread_native_id;
  uint32_t thread_ec;
  uint32_t thread_name;  // Thread#name: a String, or nil
  // The control frames: from ec->cfp up to the end of the VM stack, one frame_size apart.
  uint32_t ec_vm_stack;
  uint32_t ec_vm_stack_size;  // in VALUEs
  uint32_t ec_cfp;
  uint32_t frame_pc;
  uint32_t frame_iseq;
  uint32_t frame_ep;
  uint32_t frame_size;
  // ep[0]: the frame's flags (VM_FRAME_MAGIC_*, VM_FRAME_FLAG_*).
  uint32_t frame_magic_mask;
  uint32_t frame_magic_cfunc;
  uint32_t frame_flag_finish;  // the first frame of a C-level call of the VM loop (rb_vm_exec)
  // A cfunc frame runs no iseq: its method entry (rb_callable_method_entry_t, an imemo_ment)
  // is ep[-2], this many bytes below ep; the method's name is me->def->original_id's.
  uint32_t ep_method_entry;
  uint32_t imemo_ment;
  uint32_t method_entry_def;
  uint32_t definition_original_id;
  // ID -> name (symbol.c): a dynamic ID's serial is id >> id_scope_shift (operators, up to
  // id_last_op, are their own serial); ruby_global_symbols.ids is an Array of Arrays of
  // id_entry_unit entries of id_entry_size VALUEs, the name String first.
  uint32_t id_last_op;
  uint32_t id_scope_shift;
  uint32_t symbols_last_id;  // rb_symbols_t.last_id: the highest serial (32 bits)
  uint32_t symbols_ids;
  uint32_t id_entry_unit;
  uint32_t id_entry_size;
  // Instruction sequences: rb_iseq_t -> body.
  uint32_t iseq_body;
  uint32_t body_iseq_size;         // an unsigned int: instructions, in VALUEs
  uint32_t body_iseq_encoded;      // VALUE*
  uint32_t body_path;              // location.pathobj: a String, or [path, realpath]
  uint32_t body_label;             // location.label: a String
  uint32_t body_first_line;        // location.first_lineno: a Fixnum
  uint32_t body_insns_info;        // insns_info.body: iseq_insn_info_entry[]
  uint32_t body_insns_positions;   // insns_info.positions, or NULL once encoded as below
  uint32_t body_insns_info_size;   // insns_info.size
  uint32_t body_insns_succ_table;  // insns_info.succ_index_table
  uint32_t insn_info_size;         // sizeof(iseq_insn_info_entry); line_no first
  // Objects: RBasic.flags's type bits, strings (embedded or not) and arrays.
  uint32_t object_type_mask;
  uint32_t type_string;
  uint32_t type_array;
  uint32_t type_imemo;
  uint32_t imemo_shift;  // imemo type: (flags >> imemo_shift) & 15
  uint32_t imemo_iseq;
  uint32_t string_no_embed;  // RSTRING_NOEMBED (FL_USER1)
  uint32_t string_embed_length_shift;
  uint32_t string_embed_length_mask;
  uint32_t string_embedded;  // as.embed.ary
  uint32_t string_length;    // as.heap.len
  uint32_t string_pointer;   // as.heap.ptr
  uint32_t array_embed;      // RARRAY_EMBED_FLAG (FL_USER1)
  uint32_t array_embed_length_shift;
  uint32_t array_embed_length_mask;
  uint32_t array_embedded;  // as.ary
  uint32_t array_length;    // as.heap.len
  uint32_t array_pointer;   // as.heap.ptr
};

// Read off CRuby v3_1's vm_core.h (rb_vm_t, rb_ractor_t in ractor_core.h, rb_thread_t,
// rb_execution_context_t, rb_control_frame_t: 8 words with __bp__ and jit_return),
// method.h (rb_method_entry_t, rb_method_definition_t: a 24-byte body union after the
// bit fields), symbol.c (rb_symbols_t), id.h (tLAST_OP_ID), iseq.h and
// include/ruby/internal/core/rstring.h, rarray.h (x86-64, no USE_RVARGC), and confirmed on
// Debian's 3.1.2 (tests/integration/ruby/offsets.rb).
inline constexpr RubyLayout kRuby31{
    .version = {3, 1},
    .vm_main_ractor = 32,
    .ractor_threads_head = 304,
    .thread_native_id = 80,
    .thread_ec = 40,
    .thread_name = 352,
    .ec_vm_stack = 0,
    .ec_vm_stack_size = 8,
    .ec_cfp = 16,
    .frame_pc = 0,
    .frame_iseq = 16,
    .frame_ep = 32,
    .frame_size = 64,
    .frame_magic_mask = 0x7fff0001,
    .frame_magic_cfunc = 0x55550001,
    .frame_flag_finish = 0x0020,
    .ep_method_entry = 16,
    .imemo_ment = 6,
    .method_entry_def = 16,
    .definition_original_id = 32,
    .id_last_op = 0xa9,
    .id_scope_shift = 4,
    .symbols_last_id = 0,
    .symbols_ids = 16,
    .id_entry_unit = 512,
    .id_entry_size = 2,
    .iseq_body = 16,
    .body_iseq_size = 4,
    .body_iseq_encoded = 8,
    .body_path = 64,
    .body_label = 80,
    .body_first_line = 88,
    .body_insns_info = 120,
    .body_insns_positions = 128,
    .body_insns_info_size = 136,
    .body_insns_succ_table = 144,
    .insn_info_size = 12,
    .object_type_mask = 0x1f,
    .type_string = 0x05,
    .type_array = 0x07,
    .type_imemo = 0x1a,
    .imemo_shift = 12,
    .imemo_iseq = 7,
    .string_no_embed = 1u << 13,
    .string_embed_length_shift = 14,
    .string_embed_length_mask = 0x1f,
    .string_embedded = 16,
    .string_length = 16,
    .string_pointer = 24,
    .array_embed = 1u << 13,
    .array_embed_length_shift = 15,
    .array_embed_length_mask = 3,
    .array_embedded = 16,
    .array_length = 16,
    .array_pointer = 32,
};

inline constexpr RubyLayout kRubyLayouts[] = {kRuby31};

inline const RubyLayout* ruby_layout(RubyVersion version) {
  for (const RubyLayout& layout : kRubyLayouts)
    if (layout.version == version) return &layout;
  return nullptr;
}

}  // namespace bpfprof
