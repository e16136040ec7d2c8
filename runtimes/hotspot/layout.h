// What a Java frame walk and its naming need of HotSpot, taken from its own tables
// (runtimes/hotspot/vm_structs.h) and checked: the code cache's bounds and blobs (which pc
// is Java code, how large its frame is, which method it is), a method's names through its
// constant pool, a thread's last Java frame, and the interpreter's code and frame slots.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "runtimes/hotspot/vm_structs.h"
#include "runtimes/kit/remote_memory.h"

namespace bpfprof::hotspot {

// What lines and inlined methods need (debug_info.h); a JVM without it has names only.
// Java threads' names (java.lang.Thread.name, beyond the kernel's 15 characters): a JavaThread's
// java.lang.Thread, its `name` String found through its class's fields, and the JVM's flags
// for how references and class pointers are compressed.
struct ThreadNameLayout {
  uint64_t flags = 0;                       // &JVMFlag::flags (JVMFlag*)
  uint64_t flag_count = 0;                  // &JVMFlag::numFlags (size_t)
  uint32_t flag_size = 0;                   // sizeof(JVMFlag)
  uint32_t flag_name = 0;                   // JVMFlag::_name (const char*)
  uint32_t flag_addr = 0;                   // JVMFlag::_addr (the flag's value)
  uint64_t narrow_oop_base = 0;             // &CompressedOops::_narrow_oop._base
  uint64_t narrow_oop_shift = 0;            // &CompressedOops::_narrow_oop._shift (int)
  uint64_t narrow_klass_base = 0;           // &CompressedKlassPointers::_narrow_klass._base
  uint64_t narrow_klass_shift = 0;          // &CompressedKlassPointers::_narrow_klass._shift (int)
  uint32_t oop_klass = 0;                   // oopDesc::_metadata._compressed_klass (or _klass)
  uint32_t klass_super = 0;                 // Klass::_super
  uint32_t instance_klass_fields = 0;       // InstanceKlass::_fields (Array<u2>*)
  uint32_t instance_klass_java_fields = 0;  // InstanceKlass::_java_fields_count (u2)
  uint32_t array_u2_data = 0;               // Array<u2>::_data
  // A field's FieldInfo: `field_slots` u2 each, its name's and signature's constant pool
  // indices and its packed offset (low, high) at these slots; the offset's tag bits below it.
  int32_t field_slots = 0;
  int32_t field_name_index = 0;
  int32_t field_signature_index = 0;
  int32_t field_low_offset = 0;
  int32_t field_high_offset = 0;
  int32_t field_tag_size = 0;
};

struct DebugInfoLayout {
  uint32_t const_method_size = 0;       // sizeof(ConstMethod): its bytecodes follow it
  uint32_t const_method_flags = 0;      // ConstMethod::_flags (u2)
  uint32_t const_method_code_size = 0;  // ConstMethod::_code_size (u2)
  uint16_t has_line_table = 0;          // ConstMethod::_has_linenumber_table (a flag)
  // A compiled method's debug info, at offsets from the nmethod (ints) or as an address.
  uint32_t nmethod_metadata = 0;             // nmethod::_metadata_offset: its Metadata* table
  uint32_t scopes_data_begin = 0;            // CompiledMethod::_scopes_data_begin (address)
  uint32_t nmethod_scopes_pcs = 0;           // nmethod::_scopes_pcs_offset: its PcDescs
  uint32_t nmethod_dependencies = 0;         // nmethod::_dependencies_offset: the PcDescs' end
  uint32_t pc_desc_size = 0;                 // sizeof(PcDesc)
  uint32_t pc_desc_pc_offset = 0;            // PcDesc::_pc_offset (int, from code_begin)
  uint32_t pc_desc_scope_decode_offset = 0;  // PcDesc::_scope_decode_offset (int)
};

// Offsets are in bytes from the start of the object named first; addresses are the process's.
struct HotSpotLayout {
  // The code cache: every compiled method, stub and the interpreter lie between the bounds.
  uint64_t code_cache_low_bound = 0;   // &CodeCache::_low_bound (an address variable)
  uint64_t code_cache_high_bound = 0;  // &CodeCache::_high_bound
  uint64_t code_cache_heaps = 0;       // &CodeCache::_heaps (GrowableArray<CodeHeap*>*)
  uint32_t growable_array_length = 0;  // GrowableArrayBase::_len (int)
  uint32_t growable_array_data = 0;    // GrowableArray<int>::_data (the same for pointers)
  uint32_t code_heap_memory = 0;       // CodeHeap::_memory (a VirtualSpace)
  uint32_t code_heap_segment_map = 0;  // CodeHeap::_segmap (a VirtualSpace)
  uint32_t code_heap_log2_segment_size = 0;
  uint32_t virtual_space_low = 0;   // VirtualSpace::_low
  uint32_t virtual_space_high = 0;  // VirtualSpace::_high
  uint32_t heap_block_size = 0;     // sizeof(HeapBlock): a blob follows its block's header
  uint32_t heap_block_used = 0;     // HeapBlock::Header::_used (bool)

  // A blob (compiled method, stub, the interpreter's buffer).
  uint32_t blob_name = 0;            // CodeBlob::_name (const char*)
  uint32_t blob_size = 0;            // CodeBlob::_size (int)
  uint32_t blob_frame_size = 0;      // CodeBlob::_frame_size (int, in words)
  uint32_t blob_frame_complete = 0;  // CodeBlob::_frame_complete_offset (int)
  uint32_t blob_code_begin = 0;      // CodeBlob::_code_begin (address)
  uint32_t blob_code_end = 0;        // CodeBlob::_code_end (address)
  uint32_t compiled_method = 0;      // CompiledMethod::_method, nmethod::_method after JDK 22
  uint32_t nmethod_compile_id = 0;   // nmethod::_compile_id (int)

  // A method's names: Method -> ConstMethod -> ConstantPool -> its holder's and its Symbols.
  uint32_t method_const_method = 0;           // Method::_constMethod
  uint32_t const_method_constants = 0;        // ConstMethod::_constants
  uint32_t const_method_name_index = 0;       // ConstMethod::_name_index (u2)
  uint32_t const_method_signature_index = 0;  // ConstMethod::_signature_index (u2)
  uint32_t constant_pool_size = 0;    // sizeof(ConstantPool): its slots follow it, one word each
  uint32_t constant_pool_tags = 0;    // ConstantPool::_tags (Array<u1>*)
  uint32_t constant_pool_holder = 0;  // ConstantPool::_pool_holder (InstanceKlass*)
  uint32_t constant_pool_length = 0;  // ConstantPool::_length (int)
  uint32_t array_length = 0;          // Array<int>::_length (int)
  uint32_t array_u1_data = 0;         // Array<u1>::_data
  uint32_t instance_klass_constants = 0;  // InstanceKlass::_constants: back to the pool
  uint32_t klass_name = 0;                // Klass::_name (Symbol*)
  uint32_t symbol_length = 0;             // Symbol::_length (u2)
  uint32_t symbol_body = 0;               // Symbol::_body

  // The JVM's threads: userspace can tell which JavaThread a kernel tid is.
  uint64_t java_thread_list = 0;      // &ThreadsSMRSupport::_java_thread_list (ThreadsList*)
  uint32_t threads_list_length = 0;   // ThreadsList::_length (uint)
  uint32_t threads_list_threads = 0;  // ThreadsList::_threads (JavaThread* const*)
  // A thread's last Java frame, set when it leaves Java code for the VM or native code.
  uint32_t java_thread_anchor = 0;      // JavaThread::_anchor (a JavaFrameAnchor, inline)
  uint32_t anchor_last_java_sp = 0;     // JavaFrameAnchor::_last_Java_sp
  uint32_t anchor_last_java_pc = 0;     // JavaFrameAnchor::_last_Java_pc
  uint32_t anchor_last_java_fp = 0;     // JavaFrameAnchor::_last_Java_fp
  uint32_t thread_osthread = 0;         // JavaThread::_osthread or Thread::_osthread
  uint32_t osthread_thread_id = 0;      // OSThread::_thread_id (the kernel's tid)
  uint32_t java_thread_thread_obj = 0;  // JavaThread::_threadObj (the java.lang.Thread)

  // The template interpreter: its code is one StubQueue; its frames keep their Method* and
  // bytecode pointer at fixed word offsets from the frame pointer.
  uint64_t interpreter_code = 0;                       // &AbstractInterpreter::_code (StubQueue*)
  uint32_t stub_queue_buffer = 0;                      // StubQueue::_stub_buffer (address)
  uint32_t stub_queue_limit = 0;                       // StubQueue::_buffer_limit (int)
  std::optional<int32_t> interpreter_frame_sender_sp;  // frame::..._offset, in words from fp
  std::optional<int32_t> interpreter_frame_last_sp;
  std::optional<int32_t> interpreter_frame_method;
  std::optional<int32_t> interpreter_frame_bcp;

  std::optional<DebugInfoLayout> debug_info;     // none: the JVM lacks one of its entries
  std::optional<ThreadNameLayout> thread_names;  // none: the JVM lacks one of its entries

  // Entries the walk could use that this JVM does not export (one name each): not needed.
  std::vector<std::string> absent;
};

// Why a JVM's tables do not give a layout: the entries that are missing or implausible.
struct LayoutMissing {
  std::string reason;  // one line
};

std::variant<HotSpotLayout, LayoutMissing> hotspot_layout(const VmStructs& structs);

// A Java method as HotSpot names it: its class ("java.util.HashMap"), its name, its
// signature ("(Ljava/lang/Object;)I").
struct JavaMethodName {
  std::string klass;
  std::string method;
  std::string signature;
  std::string qualified() const { return klass + "." + method; }
};

// A Symbol's text (Klass::_name, a constant pool's names): what is wrong with it otherwise.
enum class SymbolProblem : uint8_t { kUnreadable, kTooLong, kNotAName };
std::variant<std::string, SymbolProblem> read_symbol(RemoteReader& reader,
                                                     const HotSpotLayout& layout, uint64_t address);

struct MethodNameError {
  std::string reason;  // one line
};

// The name of the Method at `method` in the process, read through `layout`: each pointer
// followed is checked (the constant pool's tags say the names are UTF-8 entries, the holder's
// pool is the method's), and Symbols are read up to 4 KiB.
std::variant<JavaMethodName, MethodNameError> read_method_name(RemoteReader& reader,
                                                               const HotSpotLayout& layout,
                                                               uint64_t method);

}  // namespace bpfprof::hotspot
