// The Perl reader (runtimes/perl): Debian's perl recognised with its release, layout and
// thread-local interpreter, and a live perl's Perl frames (tests/fixtures/perl/nest.pl: subs in
// main:: and a package, an anonymous sub, an eval block) read from its memory as its own
// caller() gives them: each sub's name, and each frame's file and line.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "runtimes/kit/remote_memory.h"
#include "runtimes/perl/binary.h"
#include "runtimes/perl/contexts.h"
#include "runtimes/perl/names.h"

namespace bpfprof {
namespace {

constexpr const char* kDebianPerl = "/usr/bin/perl";

TEST(PerlBinary, NamesOfPerlsFiles) {
  EXPECT_TRUE(is_perl_file_name("perl"));
  EXPECT_TRUE(is_perl_file_name("perl5.36.0"));
  EXPECT_TRUE(is_perl_file_name("libperl.so.5.36"));
  EXPECT_TRUE(is_perl_file_name("libperl.so.5.36.0"));
  EXPECT_FALSE(is_perl_file_name("perldoc"));
  EXPECT_FALSE(is_perl_file_name("libperlio.so"));
}

TEST(PerlBinary, AnExecutablesThreadLocalLiesBelowTheThreadPointer) {
  EXPECT_EQ(executable_tls_offset(0, 8, 8), -8);
  EXPECT_EQ(executable_tls_offset(8, 12, 16), -8);
  EXPECT_FALSE(executable_tls_offset(0, 8, 3));
  EXPECT_FALSE(executable_tls_offset(8, 8, 8));
}

// A dynamic symbol's address and size as binutils' nm reads them (each Debian update of perl
// moves them).
std::optional<std::pair<uint64_t, uint64_t>> nm_symbol(const char* file, const std::string& name) {
  const std::string command = std::string("nm -D --defined-only -S ") + file + " 2>/dev/null";
  FILE* out = popen(command.c_str(), "r");
  if (!out) return std::nullopt;
  std::optional<std::pair<uint64_t, uint64_t>> found;
  char line[512];
  while (fgets(line, sizeof line, out)) {
    std::istringstream fields(line);
    std::string address, size, type, symbol;
    if (fields >> address >> size >> type >> symbol && symbol == name)
      found = std::pair{std::stoull(address, nullptr, 16), std::stoull(size, nullptr, 16)};
  }
  pclose(out);
  return found;
}

TEST(PerlBinary, DebiansPerlGivesItsReleaseLayoutAndInterpreter) {
  if (access(kDebianPerl, R_OK) != 0) GTEST_SKIP() << "no " << kDebianPerl;
  const auto inspected = inspect_perl_binary(kDebianPerl);
  ASSERT_TRUE(std::holds_alternative<PerlBinary>(inspected))
      << std::get<PerlRejection>(inspected).reason;
  const PerlBinary& perl = std::get<PerlBinary>(inspected);
  EXPECT_EQ(perl.layout, &kPerl5_36);
  EXPECT_EQ(perl.version.minor, 36u);
  // readelf: PT_TLS of 8 bytes aligned to 8, PL_current_context at its start; the GOT slot
  // its initial-exec access reads holds -8 at run time (docs/research/perl-interpreter.md).
  EXPECT_EQ(perl.tls_offset, -8);
  const auto curinterp = nm_symbol(kDebianPerl, "PL_curinterp");
  const auto runops = nm_symbol(kDebianPerl, "Perl_runops_standard");
  ASSERT_TRUE(curinterp && runops) << "nm -D " << kDebianPerl;
  EXPECT_EQ(perl.curinterp, curinterp->first);
  EXPECT_EQ(perl.runops_start, runops->first);
  EXPECT_EQ(perl.runops_end, runops->first + runops->second);
  EXPECT_GT(runops->second, 16u);
}

TEST(PerlBinary, AnotherProgramIsRejectedWithAReason) {
  const auto inspected = inspect_perl_binary("/bin/true");
  ASSERT_TRUE(std::holds_alternative<PerlRejection>(inspected));
  EXPECT_NE(std::get<PerlRejection>(inspected).reason.find("not a threaded perl"),
            std::string::npos);
}

// nest.pl's own view of its stack: "SUB FILE LINE" per caller($i), innermost first.
struct CallerLine {
  std::string sub, file;
  uint32_t line = 0;
};

// Starts nest.pl, reads its caller() lines up to "ready"; the child is killed at the end.
class SleepingPerl {
 public:
  SleepingPerl() {
    int out[2];
    if (pipe(out) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {
      dup2(out[1], 1);
      close(out[0]);
      execl(kDebianPerl, "perl", TEST_SOURCE_DIR "/tests/fixtures/perl/nest.pl",
            static_cast<char*>(nullptr));
      _exit(127);
    }
    close(out[1]);
    std::string said;
    char buffer[256];
    for (ssize_t got; said.find("ready\n") == std::string::npos &&
                      (got = read(out[0], buffer, sizeof(buffer))) > 0;)
      said.append(buffer, static_cast<size_t>(got));
    close(out[0]);
    std::istringstream lines(said);
    for (std::string line; std::getline(lines, line) && line != "ready";) {
      CallerLine c;
      std::istringstream fields(line);
      if (fields >> c.sub >> c.file >> c.line) callers_.push_back(c);
    }
  }
  ~SleepingPerl() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  pid_t pid() const { return pid_; }
  const std::vector<CallerLine>& callers() const { return callers_; }

 private:
  pid_t pid_ = -1;
  std::vector<CallerLine> callers_;
};

// Waits (2 s at most) until `pid` sleeps in nanosleep: it prints its chain just before.
void wait_until_asleep(pid_t pid) {
  for (int i = 0; i < 200; ++i) {
    std::ifstream syscall("/proc/" + std::to_string(pid) + "/syscall");
    std::string number;
    syscall >> number;
    if (number == "35" || number == "230") return;  // nanosleep, clock_nanosleep
    usleep(10000);
  }
}

// Where the perl executable's first page is mapped in `pid`.
uint64_t load_bias(pid_t pid) {
  std::ifstream maps("/proc/" + std::to_string(pid) + "/maps");
  for (std::string line; std::getline(maps, line);) {
    uint64_t start = 0, offset = 0;
    if (line.ends_with("/usr/bin/perl") &&
        sscanf(line.c_str(), "%lx-%*x %*s %lx", &start, &offset) == 2 && offset == 0)
      return start;
  }
  return 0;
}

// The first line of `path` holding `text`, counted from 1; 0 if none.
uint32_t line_of(const char* path, const std::string& text) {
  std::ifstream file(path);
  uint32_t number = 0;
  for (std::string line; std::getline(file, line);)
    if (++number && line.find(text) != std::string::npos) return number;
  return 0;
}

TEST(PerlLive, FramesReadFromASleepingPerlAreWhatItsCallerSays) {
  if (access(kDebianPerl, X_OK) != 0) GTEST_SKIP() << "no " << kDebianPerl;
  const auto inspected = inspect_perl_binary(kDebianPerl);
  ASSERT_TRUE(std::holds_alternative<PerlBinary>(inspected));
  const PerlBinary& perl = std::get<PerlBinary>(inspected);
  SleepingPerl script;
  // inner, the anonymous sub, Orchard::middle, outer, the eval block.
  ASSERT_EQ(script.callers().size(), 5u) << "nest.pl did not say its chain";
  wait_until_asleep(script.pid());
  const uint64_t bias = load_bias(script.pid());
  ASSERT_NE(bias, 0u);
  ProcessMemory memory{Pid{script.pid()}};
  RemoteReader reader(memory, 1 << 20, kMaxPerlFileBytes);
  const std::optional<uint64_t> interpreter = reader.word(perl.curinterp + bias);
  ASSERT_TRUE(interpreter && *interpreter);
  const PerlContextStack stack = read_perl_contexts(reader, *perl.layout, *interpreter);
  ASSERT_TRUE(stack.complete);
  // caller($i) names frame i's sub and the statement that called it: frame i + 1's line.
  ASSERT_EQ(stack.frames.size(), script.callers().size() + 1);
  for (size_t i = 0; i < script.callers().size(); ++i) {
    const CallerLine& c = script.callers()[i];
    const PerlContextFrame& frame = stack.frames[i];
    if (c.sub == "(eval)") {
      EXPECT_EQ(frame.kind, PerlFrameKind::kEval) << i;
    } else {
      ASSERT_EQ(frame.kind, PerlFrameKind::kSub) << i;
      const std::optional<PerlSub> sub = read_perl_sub(reader, *perl.layout, frame.cv);
      ASSERT_TRUE(sub) << i;
      EXPECT_EQ(sub->name, c.sub) << i;
      EXPECT_FALSE(sub->xsub);
    }
    const std::optional<PerlStatement> caller =
        read_perl_statement(reader, *perl.layout, stack.frames[i + 1].cop);
    ASSERT_TRUE(caller) << i;
    EXPECT_EQ(caller->file, c.file) << i;
    EXPECT_EQ(caller->line, c.line) << i;
  }
  EXPECT_EQ(stack.frames.back().kind, PerlFrameKind::kFile);
  // The innermost frame is at its sleep.
  const std::optional<PerlStatement> asleep =
      read_perl_statement(reader, *perl.layout, stack.frames.front().cop);
  ASSERT_TRUE(asleep);
  EXPECT_EQ(asleep->line, line_of(TEST_SOURCE_DIR "/tests/fixtures/perl/nest.pl", "sleep 60;"));
}

}  // namespace
}  // namespace bpfprof
