// Where CPython keeps what a profiler reads, per interpreter version: the offsets of the
// fields of _PyRuntimeState, PyInterpreterState, PyThreadState, _PyCFrame,
// _PyInterpreterFrame (PyFrameObject before 3.11), PyCodeObject, str and bytes that the frame walk
// (runtimes/python/frames.bpf.h) and the naming of code objects (runtimes/python/code.cpp) read.
// Versions before 3.13 describe themselves nowhere (no _Py_DebugOffsets), so the numbers come from
// the headers of each release and are checked at attach time against what the binary does say
// (runtimes/python/processes.cpp). A version is one entry of kPythonLayouts.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "runtimes/python/events.h"

namespace bpfprof {

// How a code object maps its instructions to lines.
enum class PythonLineTable {
  kLnotab,     // 3.8, 3.9: co_lnotab, (byte increment, line increment) pairs
  kLinetable,  // 3.10: co_linetable, (byte length, line increment or -128: none) pairs
  kLocations,  // 3.11+: co_linetable, the location table of varint entries
};

struct PythonVersion {
  int major = 0;
  int minor = 0;
  bool operator==(const PythonVersion&) const = default;
};

// What holds the interpreters' list.
enum class PythonRuntimeState : uint8_t {
  kPyRuntime,              // _PyRuntime (3.7+), exported
  kInterpreterHeadStatic,  // 3.6: interp_head, a static that PyInterpreterState_Head returns
};

struct PythonLayout {
  PythonVersion version;
  PythonRuntimeState runtime = PythonRuntimeState::kPyRuntime;
  // The thread walk (bpf/events.h: bpfprof_python_process).
  uint32_t runtime_interpreters_head;
  uint32_t interpreter_threads_head;
  uint32_t thread_next;
  uint32_t thread_native_id;  // or thread_id (thread_key)
  bpfprof_python_thread_key thread_key;
  uint32_t thread_frame;  // the cframe, or the current frame itself (frame_anchor)
  bpfprof_python_frame_anchor frame_anchor;
  uint32_t cframe_current_frame;
  // The frame walk.
  uint32_t frame_code;
  uint32_t frame_previous;
  uint32_t frame_prev_instr;  // or f_lasti (instruction_form)
  bpfprof_python_instruction_form instruction_form;
  uint32_t frame_entry;  // the is_entry flag, or the owner byte (entry_marking)
  bpfprof_python_entry_marking entry_marking;
  uint32_t shim_owner;  // with BPFPROF_PYTHON_ENTRY_SHIM_FRAME: FRAME_OWNED_BY_CSTACK
  // Code objects: PyCode_Type's tp_basicsize in the binary must be `code_size`. Before 3.11
  // `code_qualname` is co_name (code objects had no qualified name) and the instructions are
  // in a bytes object of their own (`code_instructions` unused).
  uint32_t code_first_line;
  uint32_t code_filename;
  uint32_t code_qualname;
  uint32_t code_linetable;
  PythonLineTable line_table;
  uint32_t code_instructions;
  uint32_t code_size;
  // The parts of every object, str and bytes that naming reads.
  uint32_t object_type;       // ob_type
  uint32_t type_basic_size;   // PyTypeObject.tp_basicsize
  uint32_t str_length;        // PyASCIIObject.length (code points)
  uint32_t str_state;         // the state bit field: kind, compact, ascii
  uint32_t str_ascii_data;    // sizeof(PyASCIIObject): compact ASCII text
  uint32_t str_compact_data;  // sizeof(PyCompactUnicodeObject): other compact text
  uint32_t bytes_size;        // ob_size
  uint32_t bytes_data;        // ob_sval
  uint32_t runtime_min_size;  // _PyRuntime's symbol must be at least this large
};

// Read off CPython v3.11's Include/internal/pycore_runtime.h, pycore_interp.h,
// cpython/pystate.h, pycore_frame.h, cpython/code.h and cpython/unicodeobject.h (x86-64),
// and confirmed on Debian's 3.11.7 with ctypes (tests/integration/python/offsets.py).
inline constexpr PythonLayout kPython311{
    .version = {3, 11},
    .runtime_interpreters_head = 40,
    .interpreter_threads_head = 16,
    .thread_next = 8,
    .thread_native_id = 160,
    .thread_key = BPFPROF_PYTHON_THREAD_NATIVE_ID,
    .thread_frame = 56,
    .frame_anchor = BPFPROF_PYTHON_FRAME_IN_CFRAME,
    .cframe_current_frame = 8,
    .frame_code = 32,
    .frame_previous = 48,
    .frame_prev_instr = 56,
    .instruction_form = BPFPROF_PYTHON_INSTRUCTION_POINTER,
    .frame_entry = 68,
    .entry_marking = BPFPROF_PYTHON_ENTRY_FLAG,
    .shim_owner = 0,
    .code_first_line = 72,
    .code_filename = 112,
    .code_qualname = 128,
    .code_linetable = 136,
    .line_table = PythonLineTable::kLocations,
    .code_instructions = 184,
    .code_size = 184,
    .object_type = 8,
    .type_basic_size = 32,
    .str_length = 16,
    .str_state = 32,
    .str_ascii_data = 48,
    .str_compact_data = 72,
    .bytes_size = 16,
    .bytes_data = 32,
    .runtime_min_size = 48,
};

// 3.12: f_code first in the frame, is_entry gone: each C-level call of the interpreter loop
// pushes a shim frame (owner FRAME_OWNED_BY_CSTACK) below its frames; PEP 623 took wstr out
// of str objects. Read off v3.12's headers; confirmed on pyenv's 3.12.1 (offsets.py).
inline constexpr PythonLayout kPython312{
    .version = {3, 12},
    .runtime_interpreters_head = 40,
    .interpreter_threads_head = 72,
    .thread_next = 8,
    .thread_native_id = 144,
    .thread_key = BPFPROF_PYTHON_THREAD_NATIVE_ID,
    .thread_frame = 56,
    .frame_anchor = BPFPROF_PYTHON_FRAME_IN_CFRAME,
    .cframe_current_frame = 0,
    .frame_code = 0,
    .frame_previous = 8,
    .frame_prev_instr = 56,
    .instruction_form = BPFPROF_PYTHON_INSTRUCTION_POINTER,
    .frame_entry = 70,
    .entry_marking = BPFPROF_PYTHON_ENTRY_SHIM_FRAME,
    .shim_owner = 3,
    .code_first_line = 68,
    .code_filename = 112,
    .code_qualname = 128,
    .code_linetable = 136,
    .line_table = PythonLineTable::kLocations,
    .code_instructions = 192,
    .code_size = 192,
    .object_type = 8,
    .type_basic_size = 32,
    .str_length = 16,
    .str_state = 32,
    .str_ascii_data = 40,
    .str_compact_data = 56,
    .bytes_size = 16,
    .bytes_data = 32,
    .runtime_min_size = 48,
};

// 3.13: no _PyCFrame (the thread state points at its current frame), f_code became
// f_executable and prev_instr instr_ptr (at the same places), the interpreter state grew (its
// thread list is 7 KB in). 3.13 also describes itself in _Py_DebugOffsets at the start of
// _PyRuntime; this entry was read off v3.13's headers and confirmed on pyenv's 3.13.0
// (offsets.py).
inline constexpr PythonLayout kPython313{
    .version = {3, 13},
    .runtime_interpreters_head = 632,
    .interpreter_threads_head = 7344,
    .thread_next = 8,
    .thread_native_id = 160,
    .thread_key = BPFPROF_PYTHON_THREAD_NATIVE_ID,
    .thread_frame = 72,
    .frame_anchor = BPFPROF_PYTHON_FRAME_IN_THREAD,
    .cframe_current_frame = 0,
    .frame_code = 0,
    .frame_previous = 8,
    .frame_prev_instr = 56,
    .instruction_form = BPFPROF_PYTHON_INSTRUCTION_POINTER,
    .frame_entry = 70,
    .entry_marking = BPFPROF_PYTHON_ENTRY_SHIM_FRAME,
    .shim_owner = 3,
    .code_first_line = 68,
    .code_filename = 112,
    .code_qualname = 128,
    .code_linetable = 136,
    .line_table = PythonLineTable::kLocations,
    .code_instructions = 200,
    .code_size = 200,
    .object_type = 8,
    .type_basic_size = 32,
    .str_length = 16,
    .str_state = 32,
    .str_ascii_data = 40,
    .str_compact_data = 56,
    .bytes_size = 16,
    .bytes_data = 32,
    .runtime_min_size = 640,
};

// 3.8 to 3.10: each Python call is a PyFrameObject of its own, run by a C-level call of the
// interpreter loop (every frame begins an activation), chained from tstate->frame by f_back;
// the instruction is the int f_lasti; the thread state keeps pthread_self() (thread_id), no
// native id. Read off the v3.8, v3.9 and v3.10 headers (offsetof, with Py_BUILD_CORE) and
// confirmed on pyenv's 3.8.18, 3.9.18 and 3.10.13 (offsets.py).
inline constexpr PythonLayout kPython38{
    .version = {3, 8},
    .runtime_interpreters_head = 32,
    .interpreter_threads_head = 8,
    .thread_next = 8,
    .thread_native_id = 176,
    .thread_key = BPFPROF_PYTHON_THREAD_PTHREAD_SELF,
    .thread_frame = 24,
    .frame_anchor = BPFPROF_PYTHON_FRAME_IN_THREAD,
    .cframe_current_frame = 0,
    .frame_code = 32,
    .frame_previous = 24,
    .frame_prev_instr = 104,
    .instruction_form = BPFPROF_PYTHON_INSTRUCTION_LASTI_BYTES,
    .frame_entry = 0,
    .entry_marking = BPFPROF_PYTHON_ENTRY_EVERY_FRAME,
    .shim_owner = 0,
    .code_first_line = 40,
    .code_filename = 104,
    .code_qualname = 112,
    .code_linetable = 120,
    .line_table = PythonLineTable::kLnotab,
    .code_instructions = 0,
    .code_size = 176,
    .object_type = 8,
    .type_basic_size = 32,
    .str_length = 16,
    .str_state = 32,
    .str_ascii_data = 48,
    .str_compact_data = 72,
    .bytes_size = 16,
    .bytes_data = 32,
    .runtime_min_size = 40,
};

// 3.9: the same offsets as 3.8 (the runtime and interpreter states changed after them).
inline constexpr PythonLayout kPython39 = [] {
  PythonLayout layout = kPython38;
  layout.version = {3, 9};
  return layout;
}();

// 3.10: the frame lost f_stacktop (f_lasti 8 bytes earlier) and counts it in code units;
// co_lnotab gave way to co_linetable at the same place.
inline constexpr PythonLayout kPython310 = [] {
  PythonLayout layout = kPython38;
  layout.version = {3, 10};
  layout.frame_prev_instr = 96;
  layout.instruction_form = BPFPROF_PYTHON_INSTRUCTION_LASTI_UNITS;
  layout.line_table = PythonLineTable::kLinetable;
  return layout;
}();

// 3.7: _PyRuntimeState began with two ints and `finalizing` (the interpreters' list 8 bytes
// earlier, and the state 8 bytes shorter); code objects had no co_posonlyargcount (the fields
// from co_firstlineno on 4 bytes earlier, 8 from co_filename) and no opcache (144 bytes).
// Read off v3.7's Include/internal/pystate.h, pystate.h, frameobject.h and code.h, confirmed
// on pyenv's 3.7.16 (offsets.py).
inline constexpr PythonLayout kPython37 = [] {
  PythonLayout layout = kPython38;
  layout.version = {3, 7};
  layout.runtime_interpreters_head = 24;
  layout.code_first_line = 36;
  layout.code_filename = 96;
  layout.code_qualname = 104;
  layout.code_linetable = 112;
  layout.code_size = 144;
  layout.runtime_min_size = 32;
  return layout;
}();

// 3.6: no _PyRuntime: the "runtime" is interp_head itself (the list at 0); the thread state
// had three exception fields where 3.7 has an exception stack item and its pointer, and no
// stackcheck_counter (thread_id 24 bytes earlier); the frame kept f_exc_type, f_exc_value
// and f_exc_traceback (f_lasti 16 bytes later). Read off v3.6's Include/pystate.h and
// frameobject.h, confirmed on pyenv's 3.6.15 (offsets.py).
inline constexpr PythonLayout kPython36 = [] {
  PythonLayout layout = kPython37;
  layout.version = {3, 6};
  layout.runtime = PythonRuntimeState::kInterpreterHeadStatic;
  layout.runtime_interpreters_head = 0;
  layout.thread_native_id = 152;
  layout.frame_prev_instr = 120;
  layout.runtime_min_size = 8;
  return layout;
}();

inline constexpr PythonLayout kPythonLayouts[] = {kPython36,  kPython37,  kPython38,  kPython39,
                                                  kPython310, kPython311, kPython312, kPython313};

// From 3.13 on the interpreter describes its own layout: _PyRuntime begins with
// _Py_DebugOffsets ("xdebugpy", the version, then the offsets as 64-bit numbers), initialized
// data in the binary. Each check: where in _Py_DebugOffsets a field's offset is, and the
// layout field that must equal it (python_processes.cpp compares them at attach time).
struct DebugOffsetCheck {
  const char* name;
  uint32_t position;
  uint32_t PythonLayout::*field;
};
// Positions in 3.13's _Py_DebugOffsets (Include/internal/pycore_runtime.h, v3.13).
inline constexpr DebugOffsetCheck kPython313DebugOffsets[] = {
    {"runtime_state.interpreters_head", 40, &PythonLayout::runtime_interpreters_head},
    {"interpreter_state.threads_head", 72, &PythonLayout::interpreter_threads_head},
    {"thread_state.next", 168, &PythonLayout::thread_next},
    {"thread_state.current_frame", 184, &PythonLayout::thread_frame},
    {"thread_state.native_thread_id", 200, &PythonLayout::thread_native_id},
    {"interpreter_frame.previous", 232, &PythonLayout::frame_previous},
    {"interpreter_frame.executable", 240, &PythonLayout::frame_code},
    {"interpreter_frame.instr_ptr", 248, &PythonLayout::frame_prev_instr},
    {"interpreter_frame.owner", 264, &PythonLayout::frame_entry},
    {"code_object.filename", 280, &PythonLayout::code_filename},
    {"code_object.qualname", 296, &PythonLayout::code_qualname},
    {"code_object.linetable", 304, &PythonLayout::code_linetable},
    {"code_object.firstlineno", 312, &PythonLayout::code_first_line},
    {"code_object.co_code_adaptive", 344, &PythonLayout::code_instructions},
    {"pyobject.ob_type", 360, &PythonLayout::object_type},
};
inline std::span<const DebugOffsetCheck> python_debug_offset_checks(PythonVersion version) {
  if (version == PythonVersion{3, 13}) return kPython313DebugOffsets;
  return {};
}

inline const PythonLayout* python_layout(PythonVersion version) {
  for (const PythonLayout& layout : kPythonLayouts)
    if (layout.version == version) return &layout;
  return nullptr;
}

// The version in the name of an interpreter's file: "python3.11" (the executable, with
// libpython linked in, as Debian builds it) or "libpython3.11.so.1.0"; nullopt for any other
// name (python3, python3.11-config, ...).
std::optional<PythonVersion> python_version_from_file_name(std::string_view base_name);

}  // namespace bpfprof
