// HotSpot's own tables (runtimes/hotspot): read from a running JVM (the fixture
// fixture.HotLoop, tests/fixtures/java), checked against what the JVM itself prints (jcmd's
// list of compiled methods: their addresses, ids and names; its threads' kernel ids).
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "runtimes/hotspot/code_cache.h"
#include "runtimes/hotspot/debug_info.h"
#include "runtimes/hotspot/layout.h"
#include "runtimes/hotspot/names.h"
#include "runtimes/hotspot/thread_names.h"
#include "runtimes/hotspot/vm_structs.h"
#include "symbols/util/run_program.h"
#include "tests/unit/hotspot_fake_image.h"
#include "tests/unit/hotspot_results.h"

namespace bpfprof::hotspot {
namespace {

using namespace std::chrono_literals;

bool under_ci() {
  const char* ci = std::getenv("CI");
  return ci && std::string(ci) == "true";
}

// The JDK's bin directory: the one of `java` on PATH, else Debian's default JDK.
std::string jdk_bin() {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "");
  for (std::string dir; std::getline(dirs, dir, ':');)
    if (!dir.empty() && access((dir + "/java").c_str(), X_OK) == 0 &&
        access((dir + "/jcmd").c_str(), X_OK) == 0)
      return dir;
  if (access("/usr/lib/jvm/default-java/bin/jcmd", X_OK) == 0)
    return "/usr/lib/jvm/default-java/bin";
  return "";
}

std::string fixture_classes() { return std::string(TEST_FIXTURE_DIR) + "/java/classes"; }

// fixture.HotLoop running until the test ends (and at most 60 s: it stops on its own).
class RunningJvm {
 public:
  RunningJvm() {
    const std::string bin = jdk_bin();
    if (bin.empty() || !std::filesystem::exists(fixture_classes() + "/fixture/HotLoop.class")) {
      missing_ = "no JDK (java, jcmd) or no compiled fixture (javac at build time)";
      return;
    }
    int out[2] = {-1, -1};
    if (pipe(out) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {
      dup2(out[1], STDOUT_FILENO);
      const std::string java = bin + "/java";
      const std::string classes = fixture_classes();
      execl(java.c_str(), java.c_str(), "-Xss1m", "-cp", classes.c_str(), "fixture.HotLoop", "60",
            static_cast<char*>(nullptr));
      _exit(127);
    }
    close(out[1]);
    out_ = out[0];
    ready_ = wait_for_ready();
  }
  ~RunningJvm() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (out_ >= 0) close(out_);
  }
  RunningJvm(const RunningJvm&) = delete;
  RunningJvm& operator=(const RunningJvm&) = delete;

  // Why there is no JVM to test: a skip, or under CI a failure.
  const std::string& missing() const { return missing_; }
  bool ready() const { return ready_; }
  Pid pid() const { return Pid(pid_); }

  // jcmd's list of compiled methods once spin is among them (C2 compiles it in well under a
  // second; a loaded machine may take longer).
  std::string code_list_with_spin() const {
    const std::string jcmd = jdk_bin() + "/jcmd";
    for (int attempt = 0; attempt < 60; ++attempt) {
      const auto text = program_output({jcmd, std::to_string(pid_), "Compiler.codelist"},
                                       std::chrono::seconds(30));
      if (text && text->find("fixture.HotLoop.spin(JI)J") != std::string::npos) return *text;
      std::this_thread::sleep_for(500ms);
    }
    return "";
  }

 private:
  bool wait_for_ready() {
    std::string seen;
    const auto deadline = std::chrono::steady_clock::now() + 60s;
    while (std::chrono::steady_clock::now() < deadline) {
      pollfd p{out_, POLLIN, 0};
      if (poll(&p, 1, 1000) <= 0) continue;
      char buffer[256];
      const ssize_t got = read(out_, buffer, sizeof(buffer));
      if (got <= 0) return false;
      seen.append(buffer, static_cast<size_t>(got));
      if (seen.find("ready\n") != std::string::npos) return true;
    }
    return false;
  }

  pid_t pid_ = -1;
  int out_ = -1;
  bool ready_ = false;
  std::string missing_;
};

#define REQUIRE_JVM(jvm)                                           \
  do {                                                             \
    if (!(jvm).missing().empty()) {                                \
      if (under_ci()) FAIL() << (jvm).missing() << " under CI";    \
      GTEST_SKIP() << (jvm).missing();                             \
    }                                                              \
    ASSERT_TRUE((jvm).ready()) << "fixture.HotLoop did not start"; \
  } while (0)

long micros(std::chrono::steady_clock::duration d) {
  return static_cast<long>(std::chrono::duration_cast<std::chrono::microseconds>(d).count());
}

struct CodeListEntry {
  int compile_id = 0;
  std::string name;  // "fixture.HotLoop.spin(JI)J"
  uint64_t blob = 0, code_begin = 0, code_end = 0;
};

// jcmd Compiler.codelist: "ID LEVEL STATE NAME(SIG) [BLOB, CODE_BEGIN - CODE_END]".
std::vector<CodeListEntry> parse_code_list(const std::string& text) {
  static const std::regex line(
      R"(^(\d+) \d+ \d+ (\S+) \[0x([0-9a-f]+), 0x([0-9a-f]+) - 0x([0-9a-f]+)\]$)");
  std::vector<CodeListEntry> entries;
  std::stringstream lines(text);
  for (std::string l; std::getline(lines, l);) {
    std::smatch m;
    if (!std::regex_match(l, m, line)) continue;
    entries.push_back({std::stoi(m[1]), m[2], std::stoull(m[3], nullptr, 16),
                       std::stoull(m[4], nullptr, 16), std::stoull(m[5], nullptr, 16)});
  }
  return entries;
}

class HotSpotJvm : public testing::Test {
 protected:
  static void SetUpTestSuite() { jvm_ = new RunningJvm(); }
  static void TearDownTestSuite() {
    delete jvm_;
    jvm_ = nullptr;
  }
  // The running JVM's layout (a failure when its tables do not give one).
  static std::optional<HotSpotLayout> jvm_layout() {
    const VmStructsResult result = read_vm_structs(jvm_->pid());
    auto layout = hotspot_layout(value_of(result));
    if (auto* l = std::get_if<HotSpotLayout>(&layout)) return std::move(*l);
    ADD_FAILURE() << std::get<LayoutMissing>(layout).reason;
    return std::nullopt;
  }
  static RunningJvm* jvm_;
};
RunningJvm* HotSpotJvm::jvm_ = nullptr;

// The four tables of a JDK 17 JVM: hundreds of entries, with the entries the walk needs at
// plausible places.
TEST_F(HotSpotJvm, ReadsTheTablesOfARunningJvm) {
  REQUIRE_JVM(*jvm_);
  const auto start = std::chrono::steady_clock::now();
  const auto library = locate_jvm_library(jvm_->pid());
  const auto located = std::chrono::steady_clock::now();
  ASSERT_TRUE(std::holds_alternative<JvmLibrary>(library));
  ProcessMemory memory(jvm_->pid());
  RemoteReader reader(memory, VmStructsLimits{}.max_bytes, VmStructsLimits{}.max_string_bytes);
  const VmStructsResult result =
      read_vm_structs(reader, std::get<JvmLibrary>(library).symbols, VmStructsLimits{});
  const auto read = std::chrono::steady_clock::now();
  const VmStructs& vm = value_of(result);
  EXPECT_GT(vm.field_count(), 500u);
  EXPECT_GT(vm.type_count(), 500u);
  EXPECT_GT(vm.int_constant_count(), 100u);
  EXPECT_GT(vm.long_constant_count(), 10u);
  EXPECT_LT(vm.bytes_read(), VmStructsLimits{}.max_bytes);
  ASSERT_TRUE(vm.offset_of("CodeBlob", "_frame_size"));
  EXPECT_LT(*vm.offset_of("CodeBlob", "_frame_size"), 128u);
  EXPECT_GT(vm.size_of("JavaThread").value_or(0), 256u);
  EXPECT_GT(vm.size_of("Method").value_or(0), 0u);
  EXPECT_EQ(vm.size_of("Symbol*"), 8u);
  const VmField* name = vm.field("Klass", "_name");
  ASSERT_NE(name, nullptr);
  EXPECT_EQ(name->type_string, "Symbol*");
  EXPECT_FALSE(name->is_static);
  // A static field's address lies in libjvm's data, which the library's mappings hold.
  const auto low_bound = vm.address_of("CodeCache", "_low_bound");
  ASSERT_TRUE(low_bound);
  EXPECT_NE(*low_bound, 0u);
  EXPECT_EQ(vm.int_constant("Symbol::max_symbol_length"), 65535);
  EXPECT_EQ(vm.type("InstanceKlass")->superclass, "Klass");
  std::cout << "read " << vm.field_count() << " fields, " << vm.type_count() << " types, "
            << vm.int_constant_count() << " + " << vm.long_constant_count()
            << " constants: " << vm.bytes_read() << " bytes; libjvm found in "
            << micros(located - start) << " us, tables read in " << micros(read - located)
            << " us\n";
}

// Everything the walk and the namer need is there in JDK 17; what is not is listed.
TEST_F(HotSpotJvm, Jdk17GivesTheLayout) {
  REQUIRE_JVM(*jvm_);
  const VmStructsResult result = read_vm_structs(jvm_->pid());
  const auto layout = hotspot_layout(value_of(result));
  if (const auto* missing = std::get_if<LayoutMissing>(&layout)) FAIL() << missing->reason;
  const HotSpotLayout& l = std::get<HotSpotLayout>(layout);
  EXPECT_NE(l.code_cache_low_bound, 0u);
  EXPECT_EQ(l.interpreter_frame_sender_sp, -1);  // x86_64's frame layout
  ASSERT_TRUE(l.debug_info);                     // lines and inlined methods
  EXPECT_EQ(l.debug_info->has_line_table, 1);
  EXPECT_EQ(l.debug_info->pc_desc_size, 16u);
  for (const std::string& absent : l.absent) std::cout << "absent: " << absent << "\n";
}

// The nmethods jcmd lists are read through the layout as the JVM describes them: the same
// compile id and code range, and a Method that names as jcmd names it.
TEST_F(HotSpotJvm, NamesCompiledMethodsAsJcmdDoes) {
  REQUIRE_JVM(*jvm_);
  const std::vector<CodeListEntry> entries = parse_code_list(jvm_->code_list_with_spin());
  ASSERT_FALSE(entries.empty()) << "jcmd listed no compiled fixture.HotLoop.spin";
  const std::optional<HotSpotLayout> layout = jvm_layout();
  ASSERT_TRUE(layout);
  const HotSpotLayout& l = *layout;
  ProcessMemory memory(jvm_->pid());
  RemoteReader reader(memory, 1 << 20, 256);
  const uint64_t low = reader.word(l.code_cache_low_bound).value_or(0);
  const uint64_t high = reader.word(l.code_cache_high_bound).value_or(0);
  size_t named = 0, spin = 0;
  for (const CodeListEntry& e : entries) {
    EXPECT_TRUE(e.blob >= low && e.blob < high) << e.name;
    // A method may be freed between jcmd's list and this read: only a read that finds the
    // same compile id counts.
    if (reader.value<int32_t>(e.blob + l.nmethod_compile_id) != e.compile_id) continue;
    EXPECT_EQ(reader.word(e.blob + l.blob_code_begin), e.code_begin) << e.name;
    EXPECT_EQ(reader.word(e.blob + l.blob_code_end), e.code_end) << e.name;
    const auto method = reader.word(e.blob + l.compiled_method);
    ASSERT_TRUE(method);
    const auto name = read_method_name(reader, l, *method);
    if (const auto* error = std::get_if<MethodNameError>(&name)) {
      ADD_FAILURE() << e.name << ": " << error->reason;
      continue;
    }
    const JavaMethodName& n = std::get<JavaMethodName>(name);
    EXPECT_EQ(n.qualified() + n.signature, e.name);
    named++;
    if (n.qualified() == "fixture.HotLoop.spin") spin++;
  }
  EXPECT_GE(named, entries.size() * 9 / 10);
  EXPECT_GE(spin, 1u);
  std::cout << named << " of " << entries.size() << " compiled methods named as jcmd names them\n";
}

// The blob holding pc as the kernel walk finds it (runtimes/hotspot/walk.bpf.h): its heap's
// segment map hops back to the block's start; 0 if none.
uint64_t blob_by_segment_map(RemoteReader& reader, const bpfprof_hotspot_process& p, uint64_t pc) {
  for (uint32_t h = 0; h < p.heap_count; ++h) {
    const bpfprof_hotspot_code_heap& heap = p.heaps[h];
    if (pc < heap.low || pc >= heap.high) continue;
    uint64_t segment = (pc - heap.low) >> p.log2_segment_size;
    for (int hops = 0; hops < 48; ++hops) {
      const auto hop = reader.value<uint8_t>(heap.segmap + segment);
      if (!hop || *hop == 0xff || *hop > segment) return 0;
      if (*hop == 0) return heap.low + (segment << p.log2_segment_size) + p.heap_block_size;
      segment -= *hop;
    }
  }
  return 0;
}

// The walk's view of the code cache finds every compiled method jcmd lists from any pc in its
// code, and names it by the Method* its blob holds.
TEST_F(HotSpotJvm, CodeCacheEntryFindsEveryCompiledMethod) {
  REQUIRE_JVM(*jvm_);
  const std::vector<CodeListEntry> entries = parse_code_list(jvm_->code_list_with_spin());
  ASSERT_FALSE(entries.empty()) << "jcmd listed no compiled fixture.HotLoop.spin";
  const std::optional<HotSpotLayout> layout = jvm_layout();
  ASSERT_TRUE(layout);
  ProcessMemory memory(jvm_->pid());
  RemoteReader reader(memory, 1 << 22, 256);
  const auto entry = read_code_cache(reader, *layout);
  ASSERT_TRUE(std::holds_alternative<bpfprof_hotspot_process>(entry))
      << std::get<CodeCacheError>(entry).reason;
  const auto& p = std::get<bpfprof_hotspot_process>(entry);
  EXPECT_EQ(p.heap_count, 3u);  // JDK 17's segmented code cache: stubs, profiled, not profiled
  EXPECT_LT(p.interpreter_low, p.interpreter_high);
  EXPECT_EQ(p.interpreter_method, -24);
  EXPECT_EQ(p.interpreter_bcp, -64);
  EXPECT_EQ(p.interpreter_sender_sp, -8);
  JavaFrameNamer namer(memory, *layout);
  size_t found = 0;
  for (const CodeListEntry& e : entries) {
    if (reader.value<int32_t>(e.blob + layout->nmethod_compile_id) != e.compile_id) continue;
    for (const uint64_t pc : {e.code_begin, (e.code_begin + e.code_end) / 2, e.code_end - 1})
      EXPECT_EQ(blob_by_segment_map(reader, p, pc), e.blob) << e.name << " at " << pc;
    bpfprof_hotspot_frame frame{};
    frame.kind = BPFPROF_HOTSPOT_FRAME_COMPILED;
    frame.method = reader.word(e.blob + p.compiled_method).value_or(0);
    frame.aux = e.blob;
    // The nmethod's own method is the outermost of the methods at a pc (those inlined into
    // it come first).
    const auto names = namer.name(frame, (e.code_begin + e.code_end) / 2);
    ASSERT_FALSE(names.empty()) << e.name;
    EXPECT_TRUE(names.back().method);
    EXPECT_EQ(e.name.substr(0, e.name.find('(')), names.back().name);
    found++;
  }
  EXPECT_GE(found, entries.size() * 9 / 10);
}

// The compiled methods jcmd lists have debug info at a pc in their code: the scopes end at
// the method's own, and each scope at a known bytecode has a line there (the JDK's classes
// and the fixture's carry line numbers). A native method's wrapper has one PcDesc, at its
// call: none after the middle of its code. MethodHandle's intrinsics (linkToStatic, ...: the
// fixture's lambda compiles some) are such wrappers, and are left out.
TEST_F(HotSpotJvm, CompiledMethodsHaveScopesAndLines) {
  REQUIRE_JVM(*jvm_);
  const std::vector<CodeListEntry> entries = parse_code_list(jvm_->code_list_with_spin());
  const std::optional<HotSpotLayout> layout = jvm_layout();
  ASSERT_TRUE(layout && layout->debug_info);
  ProcessMemory memory(jvm_->pid());
  size_t read = 0, checked = 0;
  for (const CodeListEntry& e : entries) {
    RemoteReader reader(memory, kDebugInfoReadBudget, 256);
    if (reader.value<int32_t>(e.blob + layout->nmethod_compile_id) != e.compile_id) continue;
    if (e.name.starts_with("java.lang.invoke.MethodHandle.")) continue;
    const uint64_t method = reader.word(e.blob + layout->compiled_method).value_or(0);
    const auto scopes = read_compiled_scopes(reader, *layout, e.blob, method,
                                             (e.code_begin + e.code_end) / 2, PcKind::kLeaf);
    checked++;
    if (const auto* error = std::get_if<DebugInfoError>(&scopes)) {
      std::cout << e.name << ": " << error->reason << "\n";
      continue;
    }
    for (const JavaScope& scope : std::get<std::vector<JavaScope>>(scopes)) {
      RemoteReader code_reader(memory, kDebugInfoReadBudget, 256);
      const auto code = read_method_code(code_reader, *layout, scope.method);
      ASSERT_TRUE(std::holds_alternative<MethodCode>(code))
          << e.name << ": " << std::get<DebugInfoError>(code).reason;
      const MethodCode& c = std::get<MethodCode>(code);
      ASSERT_TRUE(c.lines) << e.name;
      if (scope.bci >= 0) {
        EXPECT_GT(c.lines->line_at(scope.bci), 0u) << e.name;
      }
    }
    read++;
  }
  EXPECT_GE(read, checked * 3 / 4);
  EXPECT_GE(read, 5u);
  std::cout << read << " of " << checked << " compiled methods' scopes read\n";
}

// The JVM's list of threads gives the kernel's id of each: every one is a task of the process.
TEST_F(HotSpotJvm, ThreadListGivesKernelThreadIds) {
  REQUIRE_JVM(*jvm_);
  const std::optional<HotSpotLayout> layout = jvm_layout();
  ASSERT_TRUE(layout);
  const HotSpotLayout& l = *layout;
  ProcessMemory memory(jvm_->pid());
  RemoteReader reader(memory, 1 << 20, 256);
  const auto list = reader.word(l.java_thread_list);
  ASSERT_TRUE(list && *list);
  const auto count = reader.value<uint32_t>(*list + l.threads_list_length);
  const auto threads = reader.word(*list + l.threads_list_threads);
  ASSERT_TRUE(count && threads);
  ASSERT_GT(*count, 0u);
  ASSERT_LT(*count, 1000u);
  std::set<int> tasks;
  for (const auto& task :
       std::filesystem::directory_iterator("/proc/" + std::to_string(jvm_->pid().value) + "/task"))
    tasks.insert(std::stoi(task.path().filename()));
  bool compiler_thread = false;
  for (uint32_t i = 0; i < *count; ++i) {
    const auto thread = reader.word(*threads + 8ull * i);
    ASSERT_TRUE(thread);
    const auto osthread = reader.word(*thread + l.thread_osthread);
    ASSERT_TRUE(osthread);
    const auto tid = reader.value<int32_t>(*osthread + l.osthread_thread_id);
    ASSERT_TRUE(tid);
    EXPECT_TRUE(tasks.contains(*tid)) << *tid;
    // The JIT's threads are JavaThreads too, named by the kernel as HotSpot named them.
    std::string comm;
    std::ifstream("/proc/" + std::to_string(jvm_->pid().value) + "/task/" + std::to_string(*tid) +
                  "/comm") >>
        comm;
    if (comm == "C2" || comm == "C1") compiler_thread = true;
  }
  EXPECT_TRUE(compiler_thread);
}

// Java threads' names from the JVM's objects: beyond the kernel's 15 characters, and in UTF-16
// where the name has characters LATIN1 lacks; each with a kernel tid of the process.
TEST_F(HotSpotJvm, JavaThreadNamesAreReadFromTheJvm) {
  REQUIRE_JVM(*jvm_);
  const std::optional<HotSpotLayout> layout = jvm_layout();
  ASSERT_TRUE(layout && layout->thread_names);
  ProcessMemory memory(jvm_->pid());
  RemoteReader reader(memory, 1 << 20, 256);
  JavaThreadNames names(*layout);
  std::map<std::string, int32_t> tids;
  for (const JavaThreadName& thread : names.read(reader)) tids[thread.name] = thread.tid;
  EXPECT_TRUE(tids.contains("main"));
  EXPECT_TRUE(tids.contains("a-thread-with-a-long-name"));
  EXPECT_TRUE(tids.contains("th\xc3\xa9-\xe6\x97\xa5\xe6\x9c\xac"));
  for (const auto& [name, tid] : tids)
    EXPECT_TRUE(std::filesystem::exists("/proc/" + std::to_string(jvm_->pid().value) + "/task/" +
                                        std::to_string(tid)))
        << name;
  EXPECT_LT(reader.bytes_read(), 64u << 10);
}

TEST_F(HotSpotJvm, LimitsEndTheReadWithAnError) {
  REQUIRE_JVM(*jvm_);
  VmStructsLimits tight;
  tight.max_bytes = 4096;
  VmStructsResult result = read_vm_structs(jvm_->pid(), tight);
  ASSERT_TRUE(std::holds_alternative<VmStructsError>(result));
  EXPECT_EQ(std::get<VmStructsError>(result).failure, VmStructsFailure::kBudgetUsed);
  VmStructsLimits few;
  few.max_entries = 100;
  result = read_vm_structs(jvm_->pid(), few);
  ASSERT_TRUE(std::holds_alternative<VmStructsError>(result));
  EXPECT_EQ(std::get<VmStructsError>(result).failure, VmStructsFailure::kTooMany);
}

// A JVM's last samples are often read after it exited: a compiled frame is then named by the
// method its blob held, named while the JVM ran, though its blob and scopes no longer read.
TEST(HotSpotNames, ACompiledFrameReadAfterTheJvmExitedKeepsItsMethod) {
  auto jvm = std::make_unique<RunningJvm>();
  REQUIRE_JVM(*jvm);
  const std::vector<CodeListEntry> entries = parse_code_list(jvm->code_list_with_spin());
  const VmStructsResult structs = read_vm_structs(jvm->pid());
  auto layout = hotspot_layout(value_of(structs));
  ASSERT_TRUE(std::holds_alternative<HotSpotLayout>(layout));
  const HotSpotLayout& l = std::get<HotSpotLayout>(layout);
  ProcessMemory memory(jvm->pid());
  JavaFrameNamer namer(memory, l);
  RemoteReader reader(memory, 1 << 20, 256);
  std::optional<bpfprof_hotspot_frame> spin;
  for (const CodeListEntry& e : entries) {
    if (e.name != "fixture.HotLoop.spin(JI)J" ||
        reader.value<int32_t>(e.blob + l.nmethod_compile_id) != e.compile_id)
      continue;
    bpfprof_hotspot_frame frame{};
    frame.method = reader.word(e.blob + l.compiled_method).value_or(0);
    frame.aux = e.blob;
    frame.kind = BPFPROF_HOTSPOT_FRAME_COMPILED;
    const auto names = namer.name(frame, (e.code_begin + e.code_end) / 2);
    ASSERT_FALSE(names.empty());
    EXPECT_EQ(names.back().name, "fixture.HotLoop.spin");
    spin = frame;
  }
  ASSERT_TRUE(spin) << "jcmd listed no compiled fixture.HotLoop.spin";
  jvm.reset();
  const auto names = namer.name(*spin, spin->aux + 1);
  ASSERT_EQ(names.size(), 1u);
  EXPECT_EQ(names[0].name, "fixture.HotLoop.spin");
  EXPECT_TRUE(memory.gone());
}

TEST(HotSpotVmStructs, AProcessWithoutJvmIsSaidSo) {
  const VmStructsResult result = read_vm_structs(Pid(static_cast<int32_t>(getpid())));
  ASSERT_TRUE(std::holds_alternative<VmStructsError>(result));
  EXPECT_EQ(std::get<VmStructsError>(result).failure, VmStructsFailure::kNoJvm);
}

}  // namespace
}  // namespace bpfprof::hotspot
