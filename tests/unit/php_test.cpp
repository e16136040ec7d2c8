// PHP (runtimes/php): which files are PHP binaries, their release, what Debian's php8.2 gives,
// and the names of the Zend engine's functions read from a pretend process's memory.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <variant>

#include "runtimes/kit/remote_memory.h"
#include "runtimes/php/jit_stubs.h"
#include "runtimes/php/names.h"
#include "runtimes/php/processes.h"

namespace bpfprof {
namespace {

TEST(PhpProcesses, PhpBinariesByName) {
  for (const char* name :
       {"php", "php8.2", "php-fpm8.2", "php-cgi8.2", "php-fpm", "libphp.so", "libphp8.2.so"})
    EXPECT_TRUE(is_php_file_name(name)) << name;
  for (const char* name : {"phpunit", "php-config", "libphpx.so", "python3", "php8.2.bak"})
    EXPECT_FALSE(is_php_file_name(name)) << name;
}

TEST(PhpProcesses, TheReleaseFromItsHeader) {
  const std::optional<PhpVersion> v = parse_php_version("PHP/8.2.36-1~deb12u1\r\n");
  ASSERT_TRUE(v);
  EXPECT_EQ(v->major, 8u);
  EXPECT_EQ(v->minor, 2u);
  EXPECT_EQ(v->patch, 36u);
  EXPECT_TRUE(parse_php_version("PHP/8.3"));
  EXPECT_FALSE(parse_php_version("PHP/x"));
  EXPECT_FALSE(parse_php_version("PHP/8"));
  EXPECT_FALSE(parse_php_version("Python/3.11"));
  EXPECT_NE(php_layout({8, 2, 0}), nullptr);
  EXPECT_EQ(php_layout({8, 3, 0}), nullptr);
}

// Debian's php8.2: an NTS build of 8.2 exporting its executor globals and VM loop.
TEST(PhpProcesses, DebiansPhp82) {
  const char* php = "/usr/bin/php8.2";
  if (!std::filesystem::exists(php)) {
    const char* ci = std::getenv("CI");
    if (ci && std::string(ci) == "true") FAIL() << php << " is missing (scripts/install-deps.sh)";
    GTEST_SKIP() << "no php8.2";
  }
  const auto inspected = inspect_php_binary(php);
  ASSERT_TRUE(std::holds_alternative<PhpBinary>(inspected))
      << std::get<PhpRejection>(inspected).reason;
  const PhpBinary& binary = std::get<PhpBinary>(inspected);
  EXPECT_EQ(binary.layout, &kPhp82);
  EXPECT_NE(binary.executor_globals, 0u);
  EXPECT_GT(binary.exec_size, 10000u);  // the hybrid VM: every handler inside
  // Its JIT code runs on execute_ex's frame: sp-based over the body, the caller's rbp and rbx
  // saved by its prologue.
  ASSERT_TRUE(binary.vm_rule);
  EXPECT_EQ(binary.vm_rule->cfa_rule, BPFPROF_CFA_RSP);
  EXPECT_GE(binary.vm_rule->cfa_offset, 64);
  EXPECT_EQ(binary.vm_rule->cfa_offset % 8, 0);
  EXPECT_EQ(binary.vm_rule->rbp_rule, BPFPROF_RBP_AT_CFA);
  EXPECT_EQ(binary.vm_rule->rbx_rule, BPFPROF_RBP_AT_CFA);
}

TEST(PhpProcesses, OpcachesJitBufferIsAnExecutableMappingOfDevZero) {
  EXPECT_TRUE(is_php_jit_buffer("/dev/zero (deleted)"));
  EXPECT_FALSE(is_php_jit_buffer("/dev/zero"));
  EXPECT_FALSE(is_php_jit_buffer("/tmp/dev/zero (deleted)"));
  PhpInterpreter interpreter;
  interpreter.layout = &kPhp82;
  interpreter.exec_start = 0x1000;
  interpreter.exec_end = 0x2000;
  EXPECT_TRUE(interpreter.runs_vm_loop(0x1800));
  EXPECT_FALSE(interpreter.runs_vm_loop(0x9000));
  interpreter.jit_start = 0x8000;
  interpreter.jit_end = 0xa000;
  EXPECT_TRUE(interpreter.runs_vm_loop(0x9000));
  // Without execute_ex's row the kernel is not told of the JIT code (it could not walk it).
  EXPECT_EQ(interpreter.bpf_entry().jit_high, 0u);
  bpfprof_unwind_rule rule{};
  rule.cfa_offset = 160;
  rule.cfa_rule = BPFPROF_CFA_RSP;
  interpreter.vm_rule = rule;
  EXPECT_EQ(interpreter.bpf_entry().jit_low, 0x8000u);
  EXPECT_EQ(interpreter.bpf_entry().jit_high, 0xa000u);
  EXPECT_EQ(interpreter.bpf_entry().vm_rule.cfa_offset, 160);
}

// trace_exit as PHP 8.2's JIT writes it (opcache.jit_debug's listing): the stretch from after
// its `sub $0xf8,%rsp` to after its `add $0x100,%rsp` has sp 0x100 below the loop's.
TEST(PhpJitStubs, TraceExitFoundByItsSaveAreaAroundItsCall) {
  std::vector<uint8_t> code(0x3d0, 0xcc);  // the stubs before it
  const std::vector<uint8_t> stub = {
      0x48, 0x81, 0xec, 0xf8, 0x00, 0x00, 0x00,              // sub $0xf8,%rsp
      0x4c, 0x89, 0x7c, 0x24, 0x78,                          // mov %r15,0x78(%rsp)
      0x48, 0x8b, 0xbc, 0x24, 0xf8, 0x00, 0x00, 0x00,        // mov 0xf8(%rsp),%rdi
      0x48, 0xb8, 1,    2,    3,    4,    5,    6,    7, 8,  // mov $imm64,%rax
      0xff, 0xd0,                                            // call *%rax
      0x48, 0x81, 0xc4, 0x00, 0x01, 0x00, 0x00,              // add $0x100,%rsp
      0x85, 0xc0};                                           // test %eax,%eax
  code.insert(code.end(), stub.begin(), stub.end());
  const std::optional<PhpMovedStretch> found = find_trace_exit(code);
  ASSERT_TRUE(found);
  EXPECT_EQ(found->start, 0x3d0u + 7);
  EXPECT_EQ(found->end, 0x3d0u + 32 + 7);
  EXPECT_EQ(found->moved_by, 0x100u);
  // A sub without its add, or an add that restores another amount, is not it.
  code.resize(code.size() - 9);
  EXPECT_FALSE(find_trace_exit(code));
  EXPECT_FALSE(find_trace_exit({}));
}

// A pretend process: zend_strings and a class entry at fixed addresses; frames as the BPF side
// sends them (the function's own fields, never its address).
class PhpNames : public testing::Test {
 protected:
  static constexpr uint64_t kName = 0x11000, kFile = 0x20000, kClass = 0x21000,
                            kClassName = 0x22000;

  // A zend_string (interned: flags above the type, as PHP's are); a `type` other than IS_STRING
  // (6) makes it something else.
  void place_string(uint64_t at, const std::string& text, uint8_t type = 0x16) {
    std::string bytes(24, '\0');
    const uint64_t length = text.size();
    bytes[4] = static_cast<char>(type);
    memcpy(bytes.data() + 16, &length, 8);
    memory_.place(at, bytes + text);
  }
  static bpfprof_php_frame frame(uint64_t name, uint8_t type, uint32_t call_info = 0,
                                 uint64_t scope = 0, uint32_t line_start = 1) {
    bpfprof_php_frame f{};
    f.name = name;
    f.scope = scope;
    f.type = type;
    f.call_info = call_info;
    if (type != kPhpInternalFunction) {
      f.filename = kFile;
      f.line_start = line_start;
    }
    return f;
  }
  std::optional<RuntimeFunction> name(const bpfprof_php_frame& frame) {
    RemoteReader reader(memory_, 1 << 20, 0);
    return read_php_function(reader, kPhp82, frame);
  }

  BufferMemory memory_;
};

TEST_F(PhpNames, AMethodWithItsClassFileAndLine) {
  place_string(kName, "tend");
  place_string(kFile, "/srv/app/work.php");
  std::string entry(16, '\0');
  const uint64_t class_name = kClassName;
  memcpy(entry.data() + kPhp82.class_name, &class_name, 8);
  memory_.place(kClass, entry);
  place_string(kClassName, "Grove");
  const auto f = name(frame(kName, kPhpUserFunction, 0, kClass, 17));
  ASSERT_TRUE(f);
  EXPECT_EQ(f->qualified_name, "Grove::tend");
  EXPECT_EQ(f->filename, "/srv/app/work.php");
  EXPECT_EQ(f->first_line, 17u);
  EXPECT_EQ(f->runtime, RuntimeKind::kPhp);
}

TEST_F(PhpNames, FileScopeCodeEvalAndInternalFunctions) {
  place_string(kFile, "/srv/app/index.php");
  EXPECT_EQ(name(frame(0, kPhpUserFunction, kPhpCallTop))->qualified_name, "{main}");
  EXPECT_EQ(name(frame(0, kPhpUserFunction))->qualified_name, "{include}");
  EXPECT_EQ(name(frame(0, kPhpEvalCode))->qualified_name, "{eval}");
  place_string(kName, "usort");
  const auto internal = name(frame(kName, kPhpInternalFunction));
  ASSERT_TRUE(internal);
  EXPECT_EQ(internal->qualified_name, "usort");
  EXPECT_EQ(internal->filename, "");  // internal functions have no source file
}

TEST_F(PhpNames, LongNamesAreCutAndMarkedUnreadableOnesGiveNothing) {
  place_string(kFile, "/a.php");
  place_string(kName, std::string(5000, 'n'));
  const auto f = name(frame(kName, kPhpUserFunction));
  ASSERT_TRUE(f);
  EXPECT_EQ(f->qualified_name, std::string(kMaxPhpText, 'n') + "\u2026");
  EXPECT_FALSE(name(frame(0x999000, kPhpUserFunction)));
  bpfprof_php_frame lost_file = frame(kName, kPhpUserFunction);
  lost_file.filename = 0x999000;
  EXPECT_FALSE(name(lost_file));
}

// Memory that is not a zend_string where a name should be (another type, control characters)
// names nothing: the frame is [unknown PHP function], never a name made of garbage.
TEST_F(PhpNames, WhatIsNotAStringNamesNothing) {
  place_string(kFile, "/a.php");
  place_string(kName, "looks_fine", 0x17);  // IS_ARRAY
  EXPECT_FALSE(name(frame(kName, kPhpUserFunction)));
  place_string(kName, std::string("a\x01\x02b"));
  EXPECT_FALSE(name(frame(kName, kPhpUserFunction)));
  place_string(kName, "fine");
  EXPECT_EQ(name(frame(kName, kPhpUserFunction))->qualified_name, "fine");
}

}  // namespace
}  // namespace bpfprof
