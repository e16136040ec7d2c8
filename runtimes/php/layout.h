// Where the Zend engine keeps what the PHP frame walk reads, by PHP release (x86-64, NTS
// builds: the executor globals are a plain global). Established for 8.2 (Debian 12's 8.2.x)
// from its headers, the code of its own accessors (zend_get_executed_lineno,
// zend_get_executed_filename_ex, get_active_class_name) and walks of live processes
// (docs/research/php-zend-executor.md); other releases give no PHP frames.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "runtimes/kit/release.h"

namespace bpfprof {

using PhpVersion = RuntimeRelease;

struct PhpLayout {
  uint32_t eg_current_execute_data;  // executor_globals.current_execute_data
  uint32_t ex_opline;                // zend_execute_data.opline
  uint32_t ex_func;                  // .func
  uint32_t ex_call_info;             // .This.u1.type_info (call info in its top 16 bits)
  uint32_t ex_prev;                  // .prev_execute_data
  uint32_t func_name;                // zend_function.common.function_name (type at 0)
  uint32_t func_scope;               // .common.scope
  uint32_t op_array_last;            // zend_op_array.last (u32), .opcodes a word on
  uint32_t op_array_filename;        // .filename, .line_start (u32) a word on
  uint32_t op_lineno;                // zend_op.lineno
  uint32_t op_size;                  // sizeof(zend_op)
  uint32_t string_length;            // zend_string.len
  uint32_t string_value;             // zend_string.val
  uint32_t class_name;               // zend_class_entry.name
};

inline constexpr PhpLayout kPhp82{.eg_current_execute_data = 488,
                                  .ex_opline = 0,
                                  .ex_func = 24,
                                  .ex_call_info = 40,
                                  .ex_prev = 48,
                                  .func_name = 8,
                                  .func_scope = 16,
                                  .op_array_last = 80,
                                  .op_array_filename = 152,
                                  .op_lineno = 24,
                                  .op_size = 32,
                                  .string_length = 16,
                                  .string_value = 24,
                                  .class_name = 8};

// The call info bits (zend_compile.h, ZEND_CALL_*), in This.u1.type_info >> 16.
inline constexpr uint32_t kPhpCallTop = 1u << 1;      // the first frame of an execute_ex
inline constexpr uint32_t kPhpCallClosure = 1u << 6;  // a closure's call
inline constexpr uint8_t kPhpInternalFunction = 1;
inline constexpr uint8_t kPhpUserFunction = 2;
inline constexpr uint8_t kPhpEvalCode = 4;

// "PHP/8.2.36" (the X-Powered-By header the binary carries): the release; nullopt otherwise.
std::optional<PhpVersion> parse_php_version(std::string_view text);

// The layout of a release, or nullptr where it was not established.
const PhpLayout* php_layout(const PhpVersion& version);

}  // namespace bpfprof
